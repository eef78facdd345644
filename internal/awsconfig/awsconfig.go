// Package awsconfig loads the SDK configuration the Lambdas share, so that the same binaries run on
// AWS and against the local emulators.
//
// On AWS nothing here changes the SDK's defaults. Locally, the harness points the clients at the
// emulators with the SDK's own AWS_ENDPOINT_URL_<SERVICE> variables and sets S3_USE_PATH_STYLE=true,
// because the local S3 serves buckets by path, not by virtual host.
package awsconfig

import (
	"context"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"
)

// EnvS3PathStyle, when "true", makes S3 clients address buckets by path.
const EnvS3PathStyle = "S3_USE_PATH_STYLE"

// Load returns the default SDK configuration (environment, shared config, the Lambda role), with
// the SDK's standard retryer, and the caller's options, if any.
func Load(ctx context.Context, optFns ...func(*config.LoadOptions) error) (aws.Config, error) {
	return config.LoadDefaultConfig(ctx, optFns...)
}

// S3Options applies S3_USE_PATH_STYLE to an S3 client, and turns off the SDK's DEBUG line
// "Response has no supported checksum" that it writes (to stderr, so into the function's log, not
// as JSON) for every GetObject without a full-object checksum: S3 returns none for a ranged GET,
// which is every read of Register ("for ranged GET requests ... checksums aren't returned",
// https://docs.aws.amazon.com/AmazonS3/latest/userguide/checking-object-integrity-upload.html).
// Validation itself is unchanged; only the log line goes.
func S3Options(o *s3.Options) {
	o.DisableLogOutputChecksumValidationSkipped = true
	if v, _ := strconv.ParseBool(os.Getenv(EnvS3PathStyle)); v {
		o.UsePathStyle = true
	}
}

// RetryTruncatedReads makes a client retry a read (an operation named Get…, List…, Describe…,
// Head…, BatchGet…, Query or Scan) whose successful answer was cut short: the body ended before its Content-Length, so
// the deserializer failed with io.ErrUnexpectedEOF. The SDK's standard retryer retries a
// connection that fails before the answer, but not one that fails while the body is read
// (https://github.com/aws/aws-sdk-go-v2/issues/3494), though asking again is as safe for a read.
// A write is left as it is: it may have taken effect, and its retry could answer otherwise (a
// conditional PutObject's 412). Use it with config.WithAPIOptions.
func RetryTruncatedReads(stack *middleware.Stack) error {
	return stack.Deserialize.Add(middleware.DeserializeMiddlewareFunc("RetryTruncatedReads",
		func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleDeserialize(ctx, in)
			if err != nil && errors.Is(err, io.ErrUnexpectedEOF) && isRead(awsmiddleware.GetOperationName(ctx)) {
				err = truncatedRead{err}
			}
			return out, md, err
		}), middleware.Before)
}

// isRead reports whether an operation only reads, by the names AWS gives its reads.
func isRead(op string) bool {
	for _, p := range []string{"Get", "List", "Describe", "Head", "BatchGet"} {
		if strings.HasPrefix(op, p) {
			return true
		}
	}
	return op == "Query" || op == "Scan"
}

// truncatedRead is a read's error that the standard retryer retries (retry.RetryableError).
type truncatedRead struct{ error }

func (e truncatedRead) Unwrap() error        { return e.error }
func (e truncatedRead) RetryableError() bool { return true }
