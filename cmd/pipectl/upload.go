package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/example/tenantpipeline/internal/ops"
)

// The upload commands' flags (one run's values).
var (
	flagName      string
	flagExpires   time.Duration
	flagRole      bool
	flagAllowLong bool
	flagBytes     optionalBytes
	flagMaxBytes  int64
)

// optionalBytes is --bytes: a size, and whether it was given (0 is a size, refused).
type optionalBytes struct {
	n   int64
	set bool
}

func (b *optionalBytes) String() string {
	if !b.set {
		return ""
	}
	return strconv.FormatInt(b.n, 10)
}

func (b *optionalBytes) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return errors.New("not a whole number of bytes")
	}
	b.n, b.set = n, true
	return nil
}

func uploadFlags(fs *flag.FlagSet) func() error {
	fs.StringVar(&flagName, "name", "", "the object's name under the tenant's prefix (one FILE)")
	return func() error { return nil }
}

func uploadURLFlags(fs *flag.FlagSet) func() error {
	flagBytes = optionalBytes{}
	fs.DurationVar(&flagExpires, "expires", ops.DefaultPresignExpiry, "how long the URL is valid (at most 1h without --allow-long)")
	fs.BoolVar(&flagRole, "role", false, "sign with a session of the tenant's uploader role (its own, or its pool's)")
	fs.BoolVar(&flagAllowLong, "allow-long", false, "allow --expires over 1h, up to 168h (not with --role)")
	fs.Var(&flagBytes, "bytes", "the file's exact size: the URL takes no other")
	fs.Int64Var(&flagMaxBytes, "max-bytes", ops.MaxPutBytes, "the largest size allowed (1 to 5 GiB); without --bytes, signed as the object's metadata and enforced by the pipeline")
	return func() error {
		// The bounds that do not depend on the credentials; ops.PresignUpload checks theirs.
		if flagBytes.set && flagBytes.n == 0 {
			return ops.ErrEmptyBytes
		}
		if flagMaxBytes < 1 { // 0 is ops' default, not a size
			return fmt.Errorf("--max-bytes %d is out of range: a PUT uploads 1 byte to 5 GiB (5368709120 bytes)", flagMaxBytes)
		}
		return ops.CheckPresign(presignOptions())
	}
}

func presignOptions() ops.PresignOptions {
	return ops.PresignOptions{Expires: flagExpires, AllowLong: flagAllowLong, Role: flagRole, Bytes: flagBytes.n, MaxBytes: flagMaxBytes}
}

func runUpload(ctx context.Context, e *env, args []string) (any, error) {
	tenant, paths := args[0], args[1:]
	if flagName != "" && len(paths) != 1 {
		return nil, usagef("upload --name names one file, got %d; without --name each file keeps its base name", len(paths))
	}
	files := make([]ops.UploadFile, len(paths))
	for i, p := range paths {
		files[i] = ops.UploadFile{Path: p, Name: flagName}
	}
	if flagName != "" {
		if err := ops.CheckObjectName(flagName); err != nil {
			return nil, usagef("upload --name: %v", err)
		}
	}
	o, err := e.ops(ctx)
	if err != nil {
		return nil, err
	}
	// Each line as its file is put, so an interrupted run shows what arrived.
	done := func(u ops.Uploaded) {
		if !e.g.json {
			fmt.Fprintf(e.out, "uploaded %s (version %s, %d bytes)\n", ops.ShellQuote(u.Key), orDash(u.VersionID), u.Bytes)
		}
	}
	res, err := o.Upload(ctx, tenant, files, done)
	e.human = func(any) string { return "" }
	if res == nil {
		res = []ops.Uploaded{}
	}
	return res, err
}

func runUploadURL(ctx context.Context, e *env, args []string) (any, error) {
	tenant, name := args[0], args[1]
	if err := ops.CheckObjectName(name); err != nil {
		return nil, usagef("upload-url: %v", err)
	}
	o, err := e.ops(ctx)
	if err != nil {
		return nil, err
	}
	up, err := o.PresignUpload(ctx, tenant, name, presignOptions())
	e.human = func(any) string { return presignedText(up, name) }
	return up, err
}

// presignedText is the URL on its own line, then the headers the uploader must send, one
// "Name: value" a line, then after a blank line a curl command that sends them.
func presignedText(up ops.PresignedUpload, name string) string {
	var b strings.Builder
	b.WriteString(up.URL + "\n")
	names := slices.Sorted(maps.Keys(up.Headers))
	for _, k := range names {
		fmt.Fprintf(&b, "%s: %s\n", k, up.Headers[k])
	}
	b.WriteString("\ncurl --fail -T " + ops.ShellQuote(path.Base(name)))
	for _, k := range names {
		b.WriteString(" -H " + ops.ShellQuote(k+": "+up.Headers[k]))
	}
	b.WriteString(" " + ops.ShellQuote(up.URL) + "\n")
	return b.String()
}
