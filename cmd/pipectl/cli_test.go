package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/example/tenantpipeline/internal/ops"
)

// Each shell's completion script is printed.
func TestCompletionScripts(t *testing.T) {
	for shell, want := range map[string]string{
		"bash": "# bash completion V2 for pipectl",
		"zsh":  "#compdef pipectl",
		"fish": "# fish completion for pipectl",
	} {
		t.Run(shell, func(t *testing.T) {
			code, stdout, stderr := runIn(t, world(), "completion", shell)
			if code != 0 || !strings.Contains(stdout, want) {
				t.Errorf("got exit %d, stderr %q, stdout starting %.80q; want 0 and %q", code, stderr, stdout, want)
			}
		})
	}
}

// completion without a shell, or with one it has no script for, is bad usage naming the shells.
func TestCompletionNeedsAShell(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"completion"}, "pipectl: completion needs a shell: pipectl completion SHELL, SHELL one of bash, fish, powershell or zsh\n"},
		{[]string{"completion", "tcsh"}, `pipectl: completion: no script for shell "tcsh"; SHELL is one of bash, fish, powershell or zsh` + "\n"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, stdout, stderr := runIn(t, world(), tc.args...)
			if code != exitUsage || stdout != "" || !strings.HasPrefix(stderr, tc.want) {
				t.Errorf("got exit %d, stdout %.80q, stderr %q; want exit %d, no stdout, stderr starting %q", code, stdout, stderr, exitUsage, tc.want)
			}
		})
	}
}

// The dynamic completion behind the scripts: subcommands, then the stacks' tenants.
func TestDynamicCompletion(t *testing.T) {
	for _, tc := range []struct {
		args      []string
		want      []string // completions, before the directive line
		directive string   // the directive line; "" not checked
	}{
		{[]string{"__complete", ""}, []string{"core\t", "files\t", "health\t", "pause\t", "redrive\t", "replay\t", "results\t", "resume\t", "sequence\t", "skip\t", "status\t", "upload\t", "upload-url\t", "validate\t"}, ""},
		{[]string{"__complete", "status", ""}, []string{"acme\tsilo", "globex\tsilo"}, ""},
		{[]string{"__complete", "status", "acme", ""}, []string{"acme\tsilo", "globex\tsilo"}, ""},
		{[]string{"__complete", "files", "--limit", "5", ""}, []string{"acme\tsilo", "globex\tsilo"}, ""},
		{[]string{"__complete", "--stack-prefix", "Other", "skip", ""}, []string{"zeta\tsilo"}, ""},
		// A second argument is an execution, not a tenant.
		{[]string{"__complete", "files", "acme", ""}, nil, ""},
		// sequence's subcommands, then their TENANT; N is not completed.
		{[]string{"__complete", "sequence", ""}, []string{"set\t", "skip\t"}, ""},
		{[]string{"__complete", "sequence", "skip", ""}, []string{"acme\tsilo", "globex\tsilo"}, ":4"},
		{[]string{"__complete", "--json", "sequence", "set", ""}, []string{"acme\tsilo", "globex\tsilo"}, ":4"},
		{[]string{"__complete", "sequence", "skip", "--reason", "r", ""}, []string{"acme\tsilo", "globex\tsilo"}, ":4"},
		{[]string{"__complete", "--stack-prefix", "Other", "sequence", "set", ""}, []string{"zeta\tsilo"}, ""},
		{[]string{"__complete", "sequence", "skip", "acme", ""}, nil, ":4"},
		// No stacks: nothing, not an error.
		{[]string{"__complete", "--stack-prefix", "Nothing", "status", ""}, nil, ""},
		// validate's TENANT is a tenant, its FILEs are local files (the shell's own completion).
		{[]string{"__complete", "validate", ""}, []string{"acme\tsilo", "globex\tsilo"}, ":4"},
		{[]string{"__complete", "validate", "acme", ""}, nil, ":0"},
		{[]string{"__complete", "validate", "acme", "a.csv", ""}, nil, ":0"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, stdout, stderr := runIn(t, world(), tc.args...)
			if code != 0 {
				t.Fatalf("got exit %d (%s), want 0", code, stderr)
			}
			lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
			if !strings.HasPrefix(lines[len(lines)-1], ":") {
				t.Fatalf("got %q, want a directive line last", stdout)
			}
			if d := lines[len(lines)-1]; tc.directive != "" && d != tc.directive {
				t.Errorf("got directive %s, want %s", d, tc.directive)
			}
			var got []string
			for _, l := range lines[:len(lines)-1] {
				if strings.HasPrefix(l, "completion\t") || strings.HasPrefix(l, "help\t") {
					continue
				}
				got = append(got, l)
			}
			for i := range got {
				if i < len(tc.want) && strings.HasSuffix(tc.want[i], "\t") {
					got[i] = got[i][:strings.Index(got[i], "\t")+1]
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// Completion reads no stack when building Ops fails, and completes nothing.
func TestDynamicCompletionOnError(t *testing.T) {
	newOps := func(context.Context, string) (*ops.Ops, error) { return nil, errors.New("no credentials") }
	var out, errOut strings.Builder
	code := run(context.Background(), []string{"__complete", "status", ""}, &out, &errOut, newOps)
	if code != 0 || out.String() != ":4\n" {
		t.Errorf("got exit %d, %q, want 0 and only the directive :4 (no file completion)", code, out.String())
	}
}

// Every command has its own help, by `help COMMAND` and by -h.
func TestHelpPerCommand(t *testing.T) {
	for _, c := range commands {
		words := strings.Fields(c.name) // "sequence skip" is two
		for _, args := range [][]string{append([]string{"help"}, words...), append(words, "-h"), append(words, "--help")} {
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				code, stdout, stderr := runIn(t, world(), args...)
				want := "usage: pipectl " + c.name + " " + c.args + "\n"
				if code != 0 || !strings.HasPrefix(stdout, want) || !strings.Contains(stdout, strings.TrimSpace(c.long)) {
					t.Errorf("got exit %d, stderr %q, stdout %q; want 0 and the help of %s", code, stderr, stdout, c.name)
				}
			})
		}
	}
	code, stdout, _ := runIn(t, world(), "help")
	if code != 0 || stdout != usageText {
		t.Errorf("got exit %d, %q, want 0 and the usage", code, stdout)
	}
	// A group of commands lists its own.
	for _, args := range [][]string{{"help", "sequence"}, {"sequence", "-h"}, {"sequence", "--help"}, {"--json", "sequence", "-h"}} {
		code, stdout, stderr := runIn(t, world(), args...)
		if code != 0 || !strings.HasPrefix(stdout, "usage: pipectl sequence SUBCOMMAND") ||
			!strings.Contains(stdout, "  sequence skip TENANT N --reason TEXT\n") || !strings.Contains(stdout, "  sequence set TENANT N --reason TEXT\n") {
			t.Errorf("%v: got exit %d, stderr %q, stdout %q; want 0 and sequence's commands", args, code, stderr, stdout)
		}
	}
}

// An endpoint that cannot be reached is one sentence naming it, exit 1.
func TestServerGone(t *testing.T) {
	sdkErr := func(cause error) error {
		// As the SDK wraps a transport failure: operation, retries, the request, net/http's url.Error.
		return fmt.Errorf("operation error CloudFormation: DescribeStacks, exceeded maximum number of attempts, 3, "+
			"https response error StatusCode: 0, RequestID: , request send failed, %w",
			&url.Error{Op: "Post", URL: "http://localhost:4566/", Err: cause})
	}
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"connection refused", sdkErr(refused), "cannot reach http://localhost:4566 (connection refused)"},
		{"no such host", sdkErr(&net.OpError{Op: "dial", Err: &net.DNSError{Err: "no such host", Name: "localhost", IsNotFound: true}}), "cannot reach http://localhost:4566 (no such host)"},
		{"reset", sdkErr(&net.OpError{Op: "read", Err: os.NewSyscallError("read", syscall.ECONNRESET)}), "cannot reach http://localhost:4566 (connection reset by peer)"},
		{"EOF", sdkErr(io.EOF), "cannot reach http://localhost:4566 (connection closed before an answer)"},
		{"without a URL", fmt.Errorf("tenant acme: %w", refused), "cannot reach the AWS endpoint (connection refused)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			newOps := func(context.Context, string) (*ops.Ops, error) { return nil, tc.err }
			var out, errOut strings.Builder
			code := run(context.Background(), []string{"status"}, &out, &errOut, newOps)
			got := errOut.String()
			if code != exitFailure || !strings.HasPrefix(got, "pipectl: "+tc.want+": check") || strings.Count(got, "\n") != 1 ||
				!strings.Contains(got, "AWS_ENDPOINT_URL") {
				t.Errorf("got exit %d, %q, want 1 and one line starting %q", code, got, tc.want)
			}
		})
	}
	// Other errors stay as they are, an EOF outside the transport too (a body that ends early).
	for _, err := range []error{errors.New("AccessDenied"), fmt.Errorf("deserialization failed: %w", io.ErrUnexpectedEOF)} {
		newOps := func(context.Context, string) (*ops.Ops, error) { return nil, err }
		var out, errOut strings.Builder
		if code := run(context.Background(), []string{"status"}, &out, &errOut, newOps); code != 1 || errOut.String() != "pipectl: "+err.Error()+"\n" {
			t.Errorf("got exit %d, %q, want 1 and the error as it is", code, errOut.String())
		}
	}
}

// A file whose segment execution failed shows the Lambda error inside States.TaskFailed's cause.
func TestTaskFailedUnwrapped(t *testing.T) {
	w := world()
	child := `{"ExecutionArn":"arn:aws:states:eu-west-1:123456789012:execution:seg:acme-2-s1","Status":"FAILED","Input":{"chunks":[1,2,3]},` +
		`"Error":"PermanentError","Cause":"{\"errorMessage\":\"core system answered 422: record 15: amount is negative\",\"errorType\":\"PermanentError\"}"}`
	w.Executions[1].Error, w.Executions[1].Cause = "States.TaskFailed", child
	want := "PermanentError: core system answered 422: record 15: amount is negative"
	for _, args := range [][]string{{"status", "acme"}, {"files", "acme"}} {
		code, stdout, stderr := runIn(t, w, args...)
		if code != 0 || !strings.Contains(stdout, want) || strings.Contains(stdout, "ExecutionArn") {
			t.Errorf("%v: got exit %d (%s), %q; want 0 and %q, no JSON", args, code, stderr, stdout, want)
		}
	}
}
