// Package awsconfig loads the SDK configuration the Lambdas share, so that the same binaries run on
// AWS and against the local emulators.
//
// On AWS nothing here changes the SDK's defaults. Locally, the harness points the clients at the
// emulators with the SDK's own AWS_ENDPOINT_URL_<SERVICE> variables and sets S3_USE_PATH_STYLE=true,
// because the local S3 serves buckets by path, not by virtual host.
package awsconfig

import (
	"context"
	"os"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
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
