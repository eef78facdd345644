package ops

import (
	"os/exec"
	"reflect"
	"testing"

	"github.com/example/tenantpipeline/internal/pipeline"
)

func TestShellQuote(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"inbox/acme/a.csv", "inbox/acme/a.csv"},
		{"acme-2", "acme-2"},
		{"inbox/acme/my file.csv", `'inbox/acme/my file.csv'`},
		{"inbox/acme/it's.csv", `'inbox/acme/it'\''s.csv'`},
		{`inbox/acme/"q".csv`, `'inbox/acme/"q".csv'`},
		{"inbox/acme/$HOME.csv", `'inbox/acme/$HOME.csv'`},
		{"inbox/acme/`id`;*.csv", "'inbox/acme/`id`;*.csv'"},
		{"inbox/acme/請求書 2026.csv", `'inbox/acme/請求書 2026.csv'`},
		{"inbox/acme/請求書.csv", `'inbox/acme/請求書.csv'`},
		{"", `''`},
		{"<why this file is skipped>", `'<why this file is skipped>'`},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got := ShellQuote(tc.in)
			if got != tc.want {
				t.Fatalf("got %s, want %s", got, tc.want)
			}
			// The shell reads it back as the one word it was.
			out, err := exec.Command("sh", "-c", "printf %s "+got).Output()
			if err != nil {
				t.Fatalf("sh: %v", err)
			}
			if string(out) != tc.in {
				t.Errorf("sh read %s as %q, want %q", got, out, tc.in)
			}
		})
	}
}

// The hints for a failed file are commands pipectl accepts for the tenant's policy.
func TestFailedFileCommands(t *testing.T) {
	for _, tc := range []struct {
		name, policy, errType string
		want                  []string
	}{
		{"halt, core system failure", pipeline.OnFailureHalt, pipeline.ErrPermanent,
			[]string{"pipectl skip acme 'acme 2' --reason '<why this file is skipped>'", "pipectl redrive acme 'acme 2'"}},
		// pipectl refuses to redrive a file that failed validation.
		{"halt, validation", pipeline.OnFailureHalt, pipeline.ErrValidation,
			[]string{"pipectl skip acme 'acme 2' --reason '<why this file is skipped>'"}},
		// A continue tenant refuses a skip.
		{"continue, core system failure", pipeline.OnFailureContinue, pipeline.ErrPermanent, []string{"pipectl redrive acme 'acme 2'"}},
		{"continue, validation", pipeline.OnFailureContinue, pipeline.ErrValidation, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := FailedFileCommands("acme", tc.policy, "acme 2", tc.errType); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
