package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/example/tenantpipeline/internal/ops"
)

// The upload commands' flags (one run's values).
var (
	flagName    string
	flagExpires time.Duration
	flagRole    bool
)

func uploadFlags(fs *flag.FlagSet) func() error {
	fs.StringVar(&flagName, "name", "", "the object's name under the tenant's prefix (one FILE)")
	return func() error { return nil }
}

func uploadURLFlags(fs *flag.FlagSet) func() error {
	fs.DurationVar(&flagExpires, "expires", ops.DefaultPresignExpiry, "how long the URL is valid")
	fs.BoolVar(&flagRole, "role", false, "sign with a session of the tenant's uploader role (its own, or its pool's)")
	return func() error {
		// The bounds that do not depend on the credentials; ops.PresignUpload checks theirs.
		if flagExpires < time.Second || flagExpires > ops.MaxPresignExpiry {
			return ops.CheckExpiry(flagExpires, aws.Credentials{}, time.Time{})
		}
		return nil
	}
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
	up, err := o.PresignUpload(ctx, tenant, name, flagExpires, flagRole)
	e.human = func(any) string { return up.URL + "\n" }
	return up, err
}
