package localrun

// Scheduled EventBridge rules. A rule with a ScheduleExpression invokes its targets on that
// schedule; a Lambda target is invoked asynchronously, with the target's constant Input when it
// has one, else with a "Scheduled Event" event
// (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-create-rule-schedule.html,
// https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-run-lambda-schedule.html). Only
// rate expressions are emulated ("rate(value unit)", unit minute(s), hour(s) or day(s)); a cron
// expression fails the start rather than never running. EventBridgeOptions.ScheduleScale shortens the period
// locally, so that a run need not wait minutes for the reconciler's schedule.

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/example/tenantpipeline/internal/localrun/deploy"
	"github.com/example/tenantpipeline/internal/localrun/emulate"
)

// defaultScheduleScale makes rate(1 minute) run every 5 s unless EventBridgeOptions.ScheduleScale says.
const defaultScheduleScale = 1.0 / 12

// schedule is one Lambda target of a scheduled rule.
type schedule struct {
	name  string
	every time.Duration // as synthesized, before ScheduleScale
	fn    *emulate.Function
	input []byte
}

var rateExpr = regexp.MustCompile(`^rate\(([1-9][0-9]*) (minute|minutes|hour|hours|day|days)\)$`)

// parseRate is the period of a rate expression. EventBridge takes the singular unit for a value
// of 1 and the plural otherwise.
func parseRate(expr string) (time.Duration, error) {
	m := rateExpr.FindStringSubmatch(expr)
	if m == nil {
		return 0, fmt.Errorf("schedule %q: only rate(value unit) is emulated locally", expr)
	}
	n, err := strconv.Atoi(m[1])
	if err != nil {
		return 0, fmt.Errorf("schedule %q: %w", expr, err)
	}
	unit := map[string]time.Duration{"minute": time.Minute, "hour": time.Hour, "day": 24 * time.Hour}
	name := m[2]
	if n != 1 {
		if name[len(name)-1] != 's' {
			return 0, fmt.Errorf("schedule %q: a value other than 1 takes the plural unit", expr)
		}
		name = name[:len(name)-1]
	} else if name[len(name)-1] == 's' {
		return 0, fmt.Errorf("schedule %q: the value 1 takes the singular unit", expr)
	}
	return time.Duration(n) * unit[name], nil
}

// scheduleRule records a scheduled rule's targets; each must be a function of the templates.
func (c *Cloud) scheduleRule(name string, spec deploy.Rule) error {
	every, err := parseRate(spec.Schedule)
	if err != nil {
		return err
	}
	for _, t := range spec.Targets {
		f := c.Lambda.Lookup(t.Arn)
		if f == nil {
			return fmt.Errorf("scheduled target %s is no function of the templates", t.Arn)
		}
		input := []byte(t.Input)
		if t.Input == "" {
			input, _ = json.Marshal(map[string]any{"version": "0", "id": uuid(), "detail-type": "Scheduled Event", "source": "aws.events",
				"account": emulate.Account, "region": emulate.Region, "resources": []string{"arn:aws:events:" + emulate.Region + ":" + emulate.Account + ":rule/" + name},
				"detail": map[string]any{}})
		} else if !json.Valid(input) {
			return fmt.Errorf("target %s: Input is not JSON", t.Arn)
		}
		c.schedules = append(c.schedules, schedule{name: name, every: every, fn: f, input: input})
	}
	return nil
}

// scheduleScale is the factor of the scheduled rules' periods.
func (c *Cloud) scheduleScale() float64 {
	if c.opts.events.ScheduleScale > 0 {
		return c.opts.events.ScheduleScale
	}
	return defaultScheduleScale
}

// startSchedules invokes each scheduled target once a (scaled) period, until the run ends.
func (c *Cloud) startSchedules(context.Context) error {
	for _, s := range c.schedules {
		period := scaled(s.every, c.scheduleScale())
		if period <= 0 {
			return fmt.Errorf("rule %s: scaled period %s: want more than 0", s.name, period)
		}
		fmt.Fprintf(c.logs, "eventbridge: rule %s invokes %s every %s (%s scaled by %g)\n", s.name, s.fn.Name, period, s.every, c.scheduleScale())
		go func() {
			t := time.NewTicker(period)
			defer t.Stop()
			for {
				select {
				case <-c.ctx.Done():
					return
				case <-t.C:
					c.invokeAsync(s.fn, s.input)
				}
			}
		}()
	}
	return nil
}
