package ops

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	ststypes "github.com/aws/aws-sdk-go-v2/service/sts/types"
	"github.com/aws/smithy-go"

	"github.com/example/tenantpipeline/internal/pipeline"
)

// Uploads into a tenant's prefix: by the operator (Upload), or by whoever holds a presigned PUT
// URL (PresignUpload), signed with the operator's credentials or with a session of the tenant's
// uploader role (a silo tenant's own, or its pool's). A file put either way is an object under the prefix like any other, so
// the pipeline processes it in its arrival order.

// Presigner presigns S3 requests, as s3.PresignClient does.
type Presigner interface {
	PresignPutObject(ctx context.Context, in *s3.PutObjectInput, optFns ...func(*s3.PresignOptions)) (*v4.PresignedHTTPRequest, error)
}

var _ Presigner = (*s3.PresignClient)(nil)

const (
	// MaxPresignExpiry is the longest a presigned URL is valid: "the expiration time can be set as
	// high as 7 days" when it is signed with Signature Version 4 (AWS CLI and SDKs), and a URL
	// signed with temporary credentials stops working when they expire, whatever it says.
	// https://docs.aws.amazon.com/AmazonS3/latest/userguide/using-presigned-url.html
	MaxPresignExpiry = 7 * 24 * time.Hour
	// DefaultPresignExpiry is upload-url's --expires default.
	DefaultPresignExpiry = 15 * time.Minute
	// minRoleSession and maxRoleSession bound AssumeRole's DurationSeconds: 900 seconds to the
	// role's maximum session duration, which the construct sets to one hour on every uploader
	// role; a session of a session (role chaining, as from IAM Identity Center credentials) is
	// capped at one hour as well. https://docs.aws.amazon.com/STS/latest/APIReference/API_AssumeRole.html
	minRoleSession = 15 * time.Minute
	maxRoleSession = time.Hour
	// sessionSlack is asked of STS beyond the URL's lifetime, and the most a URL is shortened to
	// end with its session: the session's expiry is counted by STS's clock from its answer and
	// has whole seconds (AssumeRole's Expiration), while the URL's lifetime starts at its signing.
	sessionSlack = time.Minute
	// MaxPutBytes is the largest object one PUT uploads: 5 GiB, upload-url's --max-bytes default.
	// https://docs.aws.amazon.com/AmazonS3/latest/userguide/upload-objects.html
	MaxPutBytes = 5 << 30
)

// CheckExpiry checks a presigned URL's expiry against S3's limit and, when the credentials that
// sign it are temporary and say when they expire, against their expiry: a URL that outlives
// them would be refused from then on, so pipectl does not hand it out.
func CheckExpiry(expires time.Duration, creds aws.Credentials, now time.Time) error {
	switch {
	case expires < time.Second:
		return fmt.Errorf("--expires %s is too short: a presigned URL lasts at least 1 second", expires)
	case expires > MaxPresignExpiry:
		return fmt.Errorf("--expires %s is past S3's limit of 7 days (168h) for a presigned URL (Signature Version 4)", expires)
	case creds.CanExpire && now.Add(expires).After(creds.Expires):
		left := creds.Expires.Sub(now).Truncate(time.Second)
		if left <= 0 {
			return fmt.Errorf("the credentials that would sign the URL expired at %s: refresh them", creds.Expires.UTC().Format(time.RFC3339))
		}
		return fmt.Errorf("--expires %s outlives the temporary credentials that sign the URL, which expire at %s (in %s), and S3 refuses the URL from then on: "+
			"ask for at most %s, or sign with longer-lived credentials", expires, creds.Expires.UTC().Format(time.RFC3339), left, left)
	}
	return nil
}

// PresignedUpload is a presigned PUT of one object under a tenant's prefix.
type PresignedUpload struct {
	URL     string    `json:"url"`
	Key     string    `json:"key"`
	Expires time.Time `json:"expires"`
	// Role is the uploader role whose session signed it; empty: the operator's credentials.
	Role string `json:"role,omitempty"`
	// Headers are the signed headers the uploader must send with the PUT, exactly (S3 refuses the
	// request otherwise): If-None-Match, Content-Length with Bytes, the encryption headers with a
	// customer-managed key.
	Headers map[string]string `json:"headers"`
	// Bytes is the one size the URL takes (PresignOptions.Bytes); nil: any size up to one PUT's.
	Bytes *int64 `json:"bytes,omitempty"`
	// MaxBytes is the most bytes a file through the URL may have when it signs no exact size
	// (PresignOptions.MaxBytes below 5 GiB): S3 stores a larger one, and the pipeline fails it
	// before registering anything. nil: one PUT's limit, or Bytes.
	MaxBytes *int64 `json:"maxBytes,omitempty"`
}

// PresignOptions bound what a presigned upload allows.
type PresignOptions struct {
	// Expires is how long the URL is valid. Default: DefaultPresignExpiry (15 minutes); at most
	// CappedPresignExpiry (1 hour) unless AllowLong.
	Expires time.Duration
	// AllowLong lifts the 1-hour cap to S3's 7 days (MaxPresignExpiry), still bounded by the
	// signing credentials' expiry; with Role the cap stays, the role session's.
	AllowLong bool
	// Role signs with a session of the tenant's uploader role instead of the operator's credentials.
	Role bool
	// Bytes is the exact size the URL takes: Content-Length is signed, and S3 refuses any other
	// with SignatureDoesNotMatch. Default (0): any size up to one PUT's. An empty file cannot be
	// bound (ErrEmptyBytes).
	Bytes int64
	// MaxBytes is the largest size the caller allows. Default: 5 GiB, one PUT's limit. A presigned
	// PUT can sign an exact size (Bytes) but no range, so below 5 GiB without Bytes the URL signs
	// the bound as the object's metadata x-amz-meta-max-bytes (pipeline.MaxBytesMetadata): the
	// uploader must send it as signed, S3 stores a larger body all the same, and Split fails such
	// a file before anything is registered.
	MaxBytes int64
}

// CappedPresignExpiry is the longest URL upload-url hands out without --allow-long. A presigned
// URL is a bearer token: whoever holds it may use it until it expires, and it cannot be revoked
// short of revoking the credentials that signed it. An hour is enough to start an upload, and
// bounds the damage of a URL that leaks (into a log, a chat, a browser history). S3's guide
// says as much: a presigned URL grants access to whoever has it, so protect it and keep its
// expiry short. https://docs.aws.amazon.com/AmazonS3/latest/userguide/using-presigned-url.html
const CappedPresignExpiry = time.Hour

// ErrEmptyBytes refuses a presigned URL bound to an empty body: the SDK's SigV4 signer signs
// Content-Length only when it is above 0, so such a URL would take a body of any size.
var ErrEmptyBytes = errors.New("--bytes 0 cannot be bound: Signature Version 4 signs no Content-Length of 0, so the URL would take any size; " +
	"upload an empty file with pipectl upload")

// checkSize checks the size bounds of a presigned upload.
func checkSize(opt PresignOptions) error {
	max := cmp.Or(opt.MaxBytes, MaxPutBytes)
	switch {
	case max < 1 || max > MaxPutBytes:
		return fmt.Errorf("--max-bytes %d is out of range: a PUT uploads 1 byte to 5 GiB (5368709120 bytes)", max)
	case opt.Bytes < 0:
		return fmt.Errorf("--bytes %d is negative: give the file's exact size", opt.Bytes)
	case opt.Bytes > max:
		return fmt.Errorf("--bytes %d is over --max-bytes %d", opt.Bytes, max)
	}
	return nil
}

// checkCap checks a URL's lifetime against upload-url's cap (CappedPresignExpiry).
func checkCap(opt PresignOptions) error {
	if opt.Expires <= CappedPresignExpiry || opt.AllowLong && !opt.Role {
		return nil
	}
	if opt.Role {
		return fmt.Errorf("--expires %s with --role: the URL lasts no longer than the role's session, and a session of the uploader role lasts at most 1h "+
			"(its maximum session duration, and AWS's limit for a session assumed from another role's session)", opt.Expires)
	}
	return fmt.Errorf("--expires %s is over 1h: a presigned URL is a bearer token that anyone holding it may use until it expires, "+
		"and 1h bounds the damage of one that leaks; pass --allow-long for up to 7 days (168h)", opt.Expires)
}

// CheckPresign checks the bounds of a presigned upload that do not depend on the credentials:
// the sizes, S3's limits of a URL's lifetime, and upload-url's cap.
func CheckPresign(opt PresignOptions) error {
	if err := checkSize(opt); err != nil {
		return err
	}
	if opt.Expires < time.Second || opt.Expires > MaxPresignExpiry {
		return CheckExpiry(opt.Expires, aws.Credentials{}, time.Time{})
	}
	return checkCap(opt)
}

// PresignUpload presigns a PUT of <tenant's prefix><name> that creates the object once: the URL
// signs If-None-Match: *, so S3 refuses it (412 PreconditionFailed) once the key exists, and it
// can neither overwrite a file nor be used twice. With opt.Bytes it signs Content-Length, and with
// a bucket encrypted by a customer-managed key the encryption headers, so the uploader can change
// neither. The headers the uploader must send are in Headers.
// With opt.Role, it is signed by a session of the tenant's uploader role, whose policy lets it put
// under that tenant's prefix only: a silo tenant's own role, assumed without tags, or its pool's,
// assumed with the session tag tenant=<id>; without, by the operator's credentials. name must
// pass CheckObjectName. Nothing is written.
func (o *Ops) PresignUpload(ctx context.Context, id, name string, opt PresignOptions) (PresignedUpload, error) {
	opt.Expires = cmp.Or(opt.Expires, DefaultPresignExpiry)
	if err := CheckObjectName(name); err != nil {
		return PresignedUpload{}, refuse("%v", err)
	}
	if err := CheckPresign(opt); err != nil {
		return PresignedUpload{}, refuse("%v", err)
	}
	t, err := o.Tenant(ctx, id)
	if err != nil {
		return PresignedUpload{}, err
	}
	key, err := keyFor(t, name)
	if err != nil {
		return PresignedUpload{}, err
	}
	if o.Presigner == nil || o.Credentials == nil {
		return PresignedUpload{}, errors.New("upload-url needs credentials and a presigner (ops.Clients.Credentials, Presigner)")
	}
	in := &s3.PutObjectInput{Bucket: aws.String(t.Bucket), Key: aws.String(key), IfNoneMatch: aws.String("*")}
	if err := o.withBucketKey(ctx, t.Bucket, in); err != nil {
		return PresignedUpload{}, err
	}
	var bound int64 // the signed x-amz-meta-max-bytes, or 0
	switch max := cmp.Or(opt.MaxBytes, MaxPutBytes); {
	case opt.Bytes > 0:
		in.ContentLength = aws.Int64(opt.Bytes)
	case max < MaxPutBytes:
		bound = max
		in.Metadata = map[string]string{pipeline.MaxBytesMetadata: strconv.FormatInt(max, 10)}
	}
	expires := opt.Expires
	now := o.Now()
	var up PresignedUpload
	var signer aws.CredentialsProvider
	if opt.Role {
		arn, tagged, err := o.uploaderRole(t)
		if err != nil {
			return PresignedUpload{}, err
		}
		creds, err := o.uploaderSession(ctx, arn, t.ID, tagged, expires)
		if err != nil {
			return PresignedUpload{}, err
		}
		signer, up.Role = creds, arn
		now = o.Now() // the URL's lifetime starts at its signing, after the session's
	} else {
		signer = o.Credentials
	}
	creds, err := signer.Retrieve(ctx)
	if err != nil {
		return PresignedUpload{}, fmt.Errorf("get AWS credentials: %w", err)
	}
	if over := now.Add(expires).Sub(creds.Expires); opt.Role && creds.CanExpire && over > 0 && over <= sessionSlack {
		// A one-hour URL asks for a one-hour session, the most a chained session may last: the
		// session then ends a fraction of a second to a few seconds before the URL would, and the
		// URL ends with it (its expires says when).
		expires = creds.Expires.Sub(now).Truncate(time.Second)
	}
	if err := CheckExpiry(expires, creds, now); err != nil {
		return PresignedUpload{}, refuse("%v", err)
	}
	req, err := o.Presigner(signer).PresignPutObject(ctx, in, s3.WithPresignExpires(expires))
	if err != nil {
		return PresignedUpload{}, fmt.Errorf("presign the PUT of s3://%s/%s: %w", t.Bucket, key, err)
	}
	up.URL, up.Key, up.Expires = req.URL, key, now.Add(expires).UTC().Truncate(time.Second)
	up.Headers = map[string]string{}
	for k, v := range req.SignedHeader {
		if !strings.EqualFold(k, "Host") && len(v) > 0 {
			up.Headers[HeaderName(k)] = strings.Join(v, ",")
		}
	}
	if opt.Bytes > 0 {
		up.Bytes = aws.Int64(opt.Bytes)
		if up.Headers["Content-Length"] != strconv.FormatInt(opt.Bytes, 10) {
			// Fail closed: a URL said to bind the size must sign it.
			return PresignedUpload{}, fmt.Errorf("presign the PUT of s3://%s/%s: the signer did not sign Content-Length %d", t.Bucket, key, opt.Bytes)
		}
	}
	if bound > 0 {
		up.MaxBytes = aws.Int64(bound)
		if up.Headers[maxBytesHeader] != strconv.FormatInt(bound, 10) {
			// Fail closed: an unsigned bound could be dropped or changed by the uploader.
			return PresignedUpload{}, fmt.Errorf("presign the PUT of s3://%s/%s: the signer did not sign %s", t.Bucket, key, maxBytesHeader)
		}
	}
	return up, nil
}

// maxBytesHeader is the header that carries a URL's signed bound (pipeline.MaxBytesMetadata).
const maxBytesHeader = "x-amz-meta-" + pipeline.MaxBytesMetadata

// HeaderName is a header's name as S3's documentation writes it: x-amz-* in lower case, the
// others canonical (If-None-Match). HTTP header names are case-insensitive.
func HeaderName(k string) string {
	if l := strings.ToLower(k); strings.HasPrefix(l, "x-amz-") {
		return l
	}
	return http.CanonicalHeaderKey(k)
}

// withBucketKey sets the bucket's customer-managed key on a PUT, when its default encryption
// names one (SSE-KMS or DSSE-KMS with a KMSMasterKeyID), so that the encryption headers are
// sent, and in a presigned URL signed: the upload cannot pick another key or none. A bucket
// encrypted with S3's keys (SSE-S3) or the AWS managed key (aws:kms without a key id) needs no
// header. A bucket without an encryption configuration (one older than S3's default encryption
// of every bucket) answers ServerSideEncryptionConfigurationNotFoundError: no header either.
// Any other failure refuses, as the URL's headers would be unknown.
// https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetBucketEncryption.html
// https://docs.aws.amazon.com/AmazonS3/latest/userguide/specifying-kms-encryption.html
func (o *Ops) withBucketKey(ctx context.Context, bucket string, in *s3.PutObjectInput) error {
	out, err := o.S3.GetBucketEncryption(ctx, &s3.GetBucketEncryptionInput{Bucket: aws.String(bucket)})
	if api, ok := errorsAs[smithy.APIError](err); ok && api.ErrorCode() == "ServerSideEncryptionConfigurationNotFoundError" {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read the default encryption of bucket %s (s3:GetEncryptionConfiguration), which says whether an upload must name its KMS key: %w", bucket, err)
	}
	if out.ServerSideEncryptionConfiguration == nil {
		return nil
	}
	for _, r := range out.ServerSideEncryptionConfiguration.Rules {
		d := r.ApplyServerSideEncryptionByDefault
		if d == nil || aws.ToString(d.KMSMasterKeyID) == "" {
			continue
		}
		if d.SSEAlgorithm != s3types.ServerSideEncryptionAwsKms && d.SSEAlgorithm != s3types.ServerSideEncryptionAwsKmsDsse {
			continue
		}
		// No x-amz-server-side-encryption-bucket-key-enabled: the object then takes the bucket's
		// S3 Bucket Key setting. https://docs.aws.amazon.com/AmazonS3/latest/userguide/configuring-bucket-key-object.html
		in.ServerSideEncryption, in.SSEKMSKeyId = d.SSEAlgorithm, d.KMSMasterKeyID
		return nil
	}
	return nil
}

// uploaderRole is the ARN of the tenant's uploader role: a silo tenant's own (its output's
// uploaderRoleArn), or its pool's; tagged says the session must carry the tag tenant=<id>, as the
// pool's role, shared by the pool's tenants, requires.
func (o *Ops) uploaderRole(t pipeline.TenantOutput) (arn string, tagged bool, err error) {
	if t.Pool == "" {
		if t.UploaderRoleARN == "" {
			return "", false, refuse("tenant %s is a silo tenant without an uploader role: set \"uploaders\" on the tenant in tenants.json "+
				"(Props.Uploaders in your own app) and deploy, or sign with your own credentials (no --role)", t.ID)
		}
		return t.UploaderRoleARN, false, nil
	}
	for _, p := range o.found.pools {
		if p.out.Pool != t.Pool {
			continue
		}
		if p.uploaderRole == "" {
			return "", false, refuse("pool %s has no uploader role; set uploaders on the pool", t.Pool)
		}
		return p.uploaderRole, true, nil
	}
	return "", false, fmt.Errorf("tenant %s names pool %s, which no stack describes", t.ID, t.Pool)
}

// uploaderSession assumes the uploader role for the tenant, for a minute longer than the URL lasts
// (at most the role's hour).
// With tagged (a pool's role), the session carries the tag tenant=<id> the role's trust policy
// requires and its policy reads (${aws:PrincipalTag/tenant}); a silo tenant's role is the
// tenant's alone, and its trust policy allows no sts:TagSession, so its session has no tags.
// https://docs.aws.amazon.com/IAM/latest/UserGuide/id_session-tags.html ("Permissions required
// to add session tags")
func (o *Ops) uploaderSession(ctx context.Context, roleARN, tenant string, tagged bool, expires time.Duration) (aws.CredentialsProvider, error) {
	seconds := int32(math.Ceil(min(max(expires+sessionSlack, minRoleSession), maxRoleSession).Seconds()))
	in := &sts.AssumeRoleInput{
		RoleArn: aws.String(roleARN),
		// [\w+=,.@-]{2,64}; a tenant id is at most 32 of a-z 0-9 -.
		RoleSessionName: aws.String("pipectl-upload-" + tenant),
		DurationSeconds: aws.Int32(seconds),
	}
	if tagged {
		in.Tags = []ststypes.Tag{{Key: aws.String(pipeline.TenantTag), Value: aws.String(tenant)}}
	}
	out, err := o.STS.AssumeRole(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("assume the uploader role %s for tenant %s: %w", roleARN, tenant, err)
	}
	c := out.Credentials
	if c == nil || c.AccessKeyId == nil || c.Expiration == nil {
		return nil, fmt.Errorf("assume the uploader role %s: STS returned no credentials", roleARN)
	}
	return sessionCredentials{AccessKeyID: aws.ToString(c.AccessKeyId), SecretAccessKey: aws.ToString(c.SecretAccessKey),
		SessionToken: aws.ToString(c.SessionToken), Source: "AssumeRole", CanExpire: true, Expires: *c.Expiration}, nil
}

// sessionCredentials are one role session's credentials, with their expiry.
type sessionCredentials aws.Credentials

func (c sessionCredentials) Retrieve(context.Context) (aws.Credentials, error) {
	return aws.Credentials(c), nil
}

// keyFor is the key of name under the tenant's prefix, within S3's length limit.
func keyFor(t pipeline.TenantOutput, name string) (string, error) {
	key := t.Prefix + name
	if len(key) > maxKeyBytes {
		return "", refuse("key %q is %d bytes; an S3 key is at most %d bytes: shorten the name", key, len(key), maxKeyBytes)
	}
	return key, nil
}

// UploadFile is one local file and the name it gets under the tenant's prefix.
type UploadFile struct {
	Path string
	// Name is the object's name under the prefix; empty: the file's base name.
	Name string
}

// Uploaded is one file put.
type Uploaded struct {
	File      string `json:"file"`
	Bucket    string `json:"bucket"`
	Key       string `json:"key"`
	VersionID string `json:"versionId"`
	Bytes     int64  `json:"bytes"`
}

// Upload puts the files under the tenant's prefix one after another, in the order given: each PUT
// has returned before the next starts, so their arrival order is the order given, which is the
// order the pipeline processes them in. Every file and name is checked before the first PUT, so
// bad input writes nothing. Each PUT creates its object or fails, as a presigned URL's does: it
// sends If-None-Match: *, so a name that exists is refused (ExistsError) instead of overwritten,
// and with a customer-managed key the bucket's encryption headers. done, if not nil, is called
// after each PUT. On a failure, the error names what was put before it and what was not.
func (o *Ops) Upload(ctx context.Context, id string, files []UploadFile, done func(Uploaded)) ([]Uploaded, error) {
	t, err := o.Tenant(ctx, id)
	if err != nil {
		return nil, err
	}
	type planned struct {
		path, key string
		size      int64
	}
	var plan []planned
	var bad []error
	byKey := map[string]string{}
	for _, f := range files {
		name := f.Name
		if name == "" {
			name = filepath.Base(f.Path)
		}
		if err := CheckObjectName(name); err != nil {
			bad = append(bad, fmt.Errorf("%s: %w", f.Path, err))
			continue
		}
		key, err := keyFor(t, name)
		if err != nil {
			bad = append(bad, fmt.Errorf("%s: %w", f.Path, err))
			continue
		}
		if other, dup := byKey[key]; dup {
			bad = append(bad, fmt.Errorf("%s and %s would both be %s: upload them separately, or one with --name", other, f.Path, key))
			continue
		}
		byKey[key] = f.Path
		st, err := os.Stat(f.Path)
		switch {
		case err != nil:
			bad = append(bad, err)
			continue
		case !st.Mode().IsRegular():
			bad = append(bad, fmt.Errorf("%s is not a regular file", f.Path))
			continue
		case st.Size() > MaxPutBytes:
			bad = append(bad, fmt.Errorf("%s is %d bytes; one PUT uploads at most 5 GiB (5368709120 bytes)", f.Path, st.Size()))
			continue
		}
		plan = append(plan, planned{path: f.Path, key: key, size: st.Size()})
	}
	if err := errors.Join(bad...); err != nil {
		return nil, refuse("nothing uploaded: %v", err)
	}
	sse := &s3.PutObjectInput{}
	if err := o.withBucketKey(ctx, t.Bucket, sse); err != nil {
		return nil, fmt.Errorf("nothing uploaded: %w", err)
	}
	var out []Uploaded
	for i, p := range plan {
		u, err := o.put(ctx, t.Bucket, p.path, p.key, sse)
		if err != nil {
			var left []string
			for _, q := range plan[i:] {
				left = append(left, q.path)
			}
			return out, fmt.Errorf("%w; %d of %d files uploaded before it, not uploaded: %s", err, i, len(plan), strings.Join(left, ", "))
		}
		out = append(out, u)
		if done != nil {
			done(u)
		}
	}
	return out, nil
}

// ExistsError is a PUT refused because its key exists: S3 answered If-None-Match: * with 412
// PreconditionFailed. https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-requests.html
type ExistsError struct{ Bucket, Key string }

func (e *ExistsError) Error() string {
	return fmt.Sprintf("s3://%s/%s already exists (S3 answered 412 PreconditionFailed to If-None-Match: *): an upload creates a file once and never overwrites one, "+
		"which the pipeline has processed or queued; choose another name (--name)", e.Bucket, e.Key)
}

// put puts one file, creating its object only (If-None-Match: *), with sse's encryption headers.
func (o *Ops) put(ctx context.Context, bucket, path, key string, sse *s3.PutObjectInput) (Uploaded, error) {
	f, err := os.Open(path)
	if err != nil {
		return Uploaded{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Uploaded{}, err
	}
	// An *os.File is seekable: the SDK reads its length and checksum, and retries from the start.
	out, err := o.S3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: f, ContentLength: aws.Int64(st.Size()),
		IfNoneMatch: aws.String("*"), ServerSideEncryption: sse.ServerSideEncryption, SSEKMSKeyId: sse.SSEKMSKeyId})
	if api, ok := errorsAs[smithy.APIError](err); ok && api.ErrorCode() == "PreconditionFailed" {
		return Uploaded{}, fmt.Errorf("upload %s: %w", path, &ExistsError{Bucket: bucket, Key: key})
	}
	if err != nil {
		return Uploaded{}, fmt.Errorf("upload %s to s3://%s/%s: %w", path, bucket, key, err)
	}
	return Uploaded{File: path, Bucket: bucket, Key: key, VersionID: aws.ToString(out.VersionId), Bytes: st.Size()}, nil
}
