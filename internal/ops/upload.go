package ops

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	ststypes "github.com/aws/aws-sdk-go-v2/service/sts/types"

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
	// maxPutBytes is the largest object one PUT uploads: 5 GB.
	// https://docs.aws.amazon.com/AmazonS3/latest/userguide/upload-objects.html
	maxPutBytes = 5 << 30
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
}

// PresignUpload presigns a PUT of <tenant's prefix><name>, valid for expires. With role, it is
// signed by a session of the tenant's uploader role, whose policy lets it put under that tenant's
// prefix only: a silo tenant's own role, assumed without tags, or its pool's, assumed with the
// session tag tenant=<id>; without role, by the operator's credentials. name must pass
// CheckObjectName. Nothing is written.
func (o *Ops) PresignUpload(ctx context.Context, id, name string, expires time.Duration, role bool) (PresignedUpload, error) {
	if err := CheckObjectName(name); err != nil {
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
	now := o.Now()
	var up PresignedUpload
	var signer aws.CredentialsProvider
	if role {
		arn, tagged, err := o.uploaderRole(t)
		if err != nil {
			return PresignedUpload{}, err
		}
		if expires > maxRoleSession {
			return PresignedUpload{}, refuse("--expires %s with --role: the URL lasts no longer than the role's session, and a session of the uploader role lasts at most 1h "+
				"(its maximum session duration, and AWS's limit for a session assumed from another role's session)", expires)
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
	if over := now.Add(expires).Sub(creds.Expires); role && creds.CanExpire && over > 0 && over <= sessionSlack {
		// A one-hour URL asks for a one-hour session, the most a chained session may last: the
		// session then ends a fraction of a second to a few seconds before the URL would, and the
		// URL ends with it (its expires says when).
		expires = creds.Expires.Sub(now).Truncate(time.Second)
	}
	if err := CheckExpiry(expires, creds, now); err != nil {
		return PresignedUpload{}, refuse("%v", err)
	}
	req, err := o.Presigner(signer).PresignPutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(t.Bucket), Key: aws.String(key)},
		s3.WithPresignExpires(expires))
	if err != nil {
		return PresignedUpload{}, fmt.Errorf("presign the PUT of s3://%s/%s: %w", t.Bucket, key, err)
	}
	up.URL, up.Key, up.Expires = req.URL, key, now.Add(expires).UTC().Truncate(time.Second)
	return up, nil
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
// bad input writes nothing. done, if not nil, is called after each PUT. On a failure, the error
// names what was put before it and what was not.
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
		case st.Size() > maxPutBytes:
			bad = append(bad, fmt.Errorf("%s is %d bytes; one PUT uploads at most 5 GiB (5368709120 bytes)", f.Path, st.Size()))
			continue
		}
		plan = append(plan, planned{path: f.Path, key: key, size: st.Size()})
	}
	if err := errors.Join(bad...); err != nil {
		return nil, refuse("nothing uploaded: %v", err)
	}
	var out []Uploaded
	for i, p := range plan {
		u, err := o.put(ctx, t.Bucket, p.path, p.key)
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

func (o *Ops) put(ctx context.Context, bucket, path, key string) (Uploaded, error) {
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
	out, err := o.S3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: f, ContentLength: aws.Int64(st.Size())})
	if err != nil {
		return Uploaded{}, fmt.Errorf("upload %s to s3://%s/%s: %w", path, bucket, key, err)
	}
	return Uploaded{File: path, Bucket: bucket, Key: key, VersionID: aws.ToString(out.VersionId), Bytes: st.Size()}, nil
}
