package localrun

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/example/tenantpipeline/internal/localrun/deploy"
)

func TestNoticeEncryption(t *testing.T) {
	for _, tc := range []struct {
		name     string
		resource *deploy.Resource
		want     int
	}{
		{"created key", &deploy.Resource{Type: "AWS::KMS::Key"}, 1},
		{"imported key on a queue", &deploy.Resource{Type: "AWS::SQS::Queue", Properties: map[string]json.RawMessage{"KmsMasterKeyId": json.RawMessage(`"arn:aws:kms:eu-west-1:111122223333:key/k"`)}}, 1},
		{"SSE-SQS", &deploy.Resource{Type: "AWS::SQS::Queue", Properties: map[string]json.RawMessage{"SqsManagedSseEnabled": json.RawMessage(`true`)}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			asm := &deploy.Assembly{Stacks: []*deploy.Stack{{Name: "S", Resources: map[string]*deploy.Resource{"A": tc.resource, "B": tc.resource}}}}
			var b bytes.Buffer
			noticeEncryption(asm, &b)
			if got := strings.Count(b.String(), "do not encrypt"); got != tc.want {
				t.Errorf("got %d notices (%q), want %d", got, b.String(), tc.want)
			}
		})
	}
}
