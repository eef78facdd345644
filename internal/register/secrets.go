package register

import (
	"context"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
)

// SecretAPI is the part of the Secrets Manager client Register uses.
type SecretAPI interface {
	GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, optFns ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

var _ SecretAPI = (*secretsmanager.Client)(nil)

// SecretTTL is how long a fetched secret is reused. A rotated secret is picked up after it, or at
// once when the core system answers 401.
const SecretTTL = 5 * time.Minute

// SecretCache fetches each secret once per TTL, so an execution environment calls Secrets Manager
// a few times an hour instead of once per chunk.
type SecretCache struct {
	api SecretAPI
	now func() time.Time
	mu  sync.Mutex
	got map[string]cachedSecret
}

type cachedSecret struct {
	value string
	at    time.Time
}

func NewSecretCache(api SecretAPI) *SecretCache {
	return &SecretCache{api: api, now: time.Now, got: map[string]cachedSecret{}}
}

// Get returns the secret's string value.
func (c *SecretCache) Get(ctx context.Context, arn string) (string, error) {
	c.mu.Lock()
	s, ok := c.got[arn]
	c.mu.Unlock()
	if ok && c.now().Sub(s.at) < SecretTTL {
		return s.value, nil
	}
	out, err := c.api.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(arn)})
	if err != nil {
		return "", err
	}
	c.mu.Lock()
	c.got[arn] = cachedSecret{value: aws.ToString(out.SecretString), at: c.now()}
	c.mu.Unlock()
	return aws.ToString(out.SecretString), nil
}

// Forget drops a secret, so the next Get fetches it again.
func (c *SecretCache) Forget(arn string) {
	c.mu.Lock()
	delete(c.got, arn)
	c.mu.Unlock()
}
