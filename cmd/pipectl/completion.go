package main

import (
	"context"
	"flag"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// completionTimeout bounds the stack reads behind one completion: a shell waits for it.
const completionTimeout = 3 * time.Second

// completeTenants completes a command's TENANT argument (every argument of status) with the
// tenant ids the stacks describe, each with its pool or "silo" as the description, and health's
// POOL with the pools; validate's FILE arguments complete as file names. The stacks
// are read only when completing, within completionTimeout; on any error nothing is completed, so
// the shell falls back to nothing rather than to file names.
func completeTenants(c command, newOps newOpsFunc) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
		const none = cobra.ShellCompDirectiveNoFileComp
		// Flags are not parsed by cobra (DisableFlagParsing): args holds them too.
		g := globals{stackPrefix: prefixFlag{value: defaultStackPrefix}}
		fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		g.register(fs)
		if c.flags != nil {
			c.flags(fs)
		}
		pos, err := parseInterspersed(fs, args)
		if err == nil && (c.name == "validate" || c.name == "upload") && len(pos) > 0 {
			return nil, cobra.ShellCompDirectiveDefault // validate's and upload's FILEs are local files
		}
		if err != nil || (c.name != "status" && len(pos) > 0) || strings.HasPrefix(c.name, "core ") { // a core system is no tenant
			return nil, none
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), completionTimeout)
		defer cancel()
		e := &env{g: g, newOps: newOps}
		o, err := e.ops(ctx)
		if err != nil {
			return nil, none
		}
		ts, err := o.Tenants(ctx)
		if err != nil {
			return nil, none
		}
		var out []cobra.Completion
		if c.name == "health" { // its argument is a pool
			seen := map[string]bool{}
			for _, t := range ts {
				if t.Pool != "" && !seen[t.Pool] {
					seen[t.Pool] = true
					out = append(out, cobra.CompletionWithDesc(t.Pool, "pool"))
				}
			}
			return out, none
		}
		for _, t := range ts {
			where := "silo"
			if t.Pool != "" {
				where = "pool " + t.Pool
			}
			out = append(out, cobra.CompletionWithDesc(t.ID, where))
		}
		return out, none
	}
}
