package register

import (
	"context"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/smithy-go"
)

// fakeSecrets is Secrets Manager with one value per ARN that tests may change (a rotation).
type fakeSecrets struct {
	mu     sync.Mutex
	values map[string]string
	calls  int
	err    error
}

func (f *fakeSecrets) GetSecretValue(_ context.Context, in *secretsmanager.GetSecretValueInput, _ ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.err != nil {
		return nil, f.err
	}
	v, ok := f.values[aws.ToString(in.SecretId)]
	if !ok {
		return nil, &smithy.OperationError{ServiceID: "Secrets Manager", OperationName: "GetSecretValue",
			Err: &smithy.GenericAPIError{Code: "ResourceNotFoundException", Message: "not found"}}
	}
	return &secretsmanager.GetSecretValueOutput{SecretString: aws.String(v)}, nil
}
