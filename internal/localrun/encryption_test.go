package localrun

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestNoticeEncryption(t *testing.T) {
	for _, tc := range []struct {
		name     string
		resource *Resource
		want     int
	}{
		{"created key", &Resource{Type: "AWS::KMS::Key"}, 1},
		{"imported key on a queue", &Resource{Type: "AWS::SQS::Queue", Properties: map[string]json.RawMessage{"KmsMasterKeyId": json.RawMessage(`"arn:aws:kms:eu-west-1:111122223333:key/k"`)}}, 1},
		{"SSE-SQS", &Resource{Type: "AWS::SQS::Queue", Properties: map[string]json.RawMessage{"SqsManagedSseEnabled": json.RawMessage(`true`)}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			asm := &Assembly{Stacks: []*Stack{{Name: "S", Resources: map[string]*Resource{"A": tc.resource, "B": tc.resource}}}}
			var b bytes.Buffer
			noticeEncryption(asm, &b)
			if got := strings.Count(b.String(), "do not encrypt"); got != tc.want {
				t.Errorf("got %d notices (%q), want %d", got, b.String(), tc.want)
			}
		})
	}
}
