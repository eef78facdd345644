package controller

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// tenantStore is a pooled tenant's object store: every key the controller reads or writes for a
// tenant is that tenant's (control/<tenant>/…: the pause marker, the order counter, the wake-up
// state, the skip markers; quarantine/<tenant>/…), so each call goes out with the client of a
// session tagged with the tenant of the message group or the execution's input
// (internal/tenantcreds), and the pool's tenant-scoped role refuses a key of any other tenant.
// The client is looked up on every call, so that the sessions' cache, not the Pool's handlers,
// bounds how many are kept. A tenant without a client fails every call: a marker that cannot be
// read holds the tenant.
type tenantStore struct {
	tenant  string
	objects func(tenant string) (objectStore, error)
}

func (s tenantStore) GetObject(ctx context.Context, in *s3.GetObjectInput, optFns ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	c, err := s.objects(s.tenant)
	if err != nil {
		return nil, err
	}
	return c.GetObject(ctx, in, optFns...)
}

func (s tenantStore) PutObject(ctx context.Context, in *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	c, err := s.objects(s.tenant)
	if err != nil {
		return nil, err
	}
	return c.PutObject(ctx, in, optFns...)
}

// ListObjectsV2 lists with the tenant's session: the tenant-scoped role may list only under the
// tenant's own prefixes, which is where the pause marker's absence is checked (paused.go). Without
// it a missing marker that S3 answers with 403 could never be told from an unreadable one, and
// every pooled tenant would be held.
func (s tenantStore) ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, optFns ...func(*s3.Options)) (*s3.ListObjectsV2Output, error) {
	c, err := s.objects(s.tenant)
	if err != nil {
		return nil, err
	}
	l, ok := c.(objectLister)
	if !ok {
		return nil, fmt.Errorf("tenant %q: the session's client cannot list objects", s.tenant)
	}
	return l.ListObjectsV2(ctx, in, optFns...)
}

var _ objectLister = tenantStore{}

// DeleteObject deletes with the tenant's session: a sequenced tenant's held file, once it runs.
func (s tenantStore) DeleteObject(ctx context.Context, in *s3.DeleteObjectInput, optFns ...func(*s3.Options)) (*s3.DeleteObjectOutput, error) {
	c, err := s.objects(s.tenant)
	if err != nil {
		return nil, err
	}
	d, ok := c.(interface {
		DeleteObject(ctx context.Context, in *s3.DeleteObjectInput, optFns ...func(*s3.Options)) (*s3.DeleteObjectOutput, error)
	})
	if !ok {
		return nil, fmt.Errorf("tenant %q: the session's client cannot delete objects", s.tenant)
	}
	return d.DeleteObject(ctx, in, optFns...)
}
