package ops

import (
	"fmt"
	"strings"

	"github.com/example/tenantpipeline/internal/pipeline"
)

// ShellQuote quotes s as one word for a POSIX shell, so that a hint can be pasted as it stands:
// a word of only safe characters is left as it is; any other is put in single quotes, inside which
// a POSIX shell gives no character a special meaning, and each single quote becomes '\”.
// https://pubs.opengroup.org/onlinepubs/9799919799/utilities/V3_chap02.html#tag_19_02_02
func ShellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@%+=:,./_-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// shellWords is a command line of words, each quoted for a POSIX shell.
func shellWords(words ...string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = ShellQuote(w)
	}
	return strings.Join(q, " ")
}

// SkipReasonPlaceholder is what a hint puts where the operator writes why a file is skipped.
const SkipReasonPlaceholder = "<why this file is skipped>"

// FailedFileCommands are the pipectl commands that deal with a tenant's failed file, as pipectl
// and the local run print them alike. Under halt: skip always (it releases the tenant), and
// redrive unless the file failed validation, because pipectl refuses that redrive (it reads the
// same file and fails the same way). Under continue the tenant is not held and a skip is refused:
// redrive the file unless it failed validation; a file that failed validation is replaced by
// uploading a corrected one, so there is no command for it.
func FailedFileCommands(tenant, policy, execution, errType string) []string {
	var cmds []string
	if policy == pipeline.OnFailureHalt {
		cmds = append(cmds, shellWords("pipectl", "skip", tenant, execution, "--reason", SkipReasonPlaceholder))
	}
	if errType != pipeline.ErrValidation {
		cmds = append(cmds, shellWords("pipectl", "redrive", tenant, execution))
	}
	return cmds
}

// ReleaseText is what an operator reads under a halted tenant, in pipectl status and in the local
// run's halt message alike: one sentence, then the commands that release it (FailedFileCommands),
// one a line; every line starts with indent, the commands with two spaces more.
func ReleaseText(indent string, cmds []string) string {
	var b strings.Builder
	b.WriteString(indent + "the tenant waits for an operator; nothing of it runs until one of:\n")
	for _, c := range cmds {
		b.WriteString(indent + "  " + c + "\n")
	}
	return b.String()
}

// replayCommand is the hint that registers a file again.
func replayCommand(tenant, key, versionID string) string {
	words := []string{"pipectl", "replay", tenant, key}
	if versionID != "" {
		words = append(words, "--version-id", versionID)
	}
	return shellWords(words...)
}

// validationRefusal says why a redrive of a file that failed validation is refused, and what
// works instead for the tenant's policy.
func validationRefusal(t pipeline.TenantOutput, execution, msg string) error {
	instead := "replaced (upload a corrected file)"
	if cmds := FailedFileCommands(t.ID, t.Policy, execution, pipeline.ErrValidation); len(cmds) > 0 {
		instead = fmt.Sprintf("skipped (%s) or replaced (upload a corrected file)", strings.Join(cmds, "; "))
	}
	return refuse("execution %s failed validation (%s: %s): a redrive reads the same file and fails the same way; "+
		"a file that fails validation can only be %s; pass --force to redrive it anyway",
		execution, pipeline.ErrValidation, oneLine(msg), instead)
}
