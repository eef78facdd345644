package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials/ec2rolecreds"
)

// errNoCredentials is what an operator reads when the SDK's chain found nothing: with no
// credentials in the environment or a profile, the chain ends at the instance role (IMDS), and the
// SDK's error for that is a chain of wrapped IMDS failures.
var errNoCredentials = errors.New("no AWS credentials found (environment, profile, SSO, container or instance role); " +
	"for the local stack, source the env file that --serve wrote (make serve: . .build/local/env)")

// checkCredentials retrieves the credentials once, before the first call, so that missing ones are
// one clear line. The SDK caches what it retrieved, so the first call does not fetch them again.
// https://docs.aws.amazon.com/sdkref/latest/guide/standardized-credentials.html
func checkCredentials(ctx context.Context, cfg aws.Config) error {
	if cfg.Credentials == nil {
		return errNoCredentials
	}
	_, err := cfg.Credentials.Retrieve(ctx)
	switch {
	case err == nil:
		return nil
	case aws.IsCredentialsProvider(cfg.Credentials, (*ec2rolecreds.Provider)(nil)):
		// Nothing else was configured: outside EC2 there is no instance role either.
		return errNoCredentials
	}
	// A configured source that failed (an expired SSO session, a broken profile) says why itself.
	return fmt.Errorf("get AWS credentials: %w", err)
}
