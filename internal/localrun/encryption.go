package localrun

import (
	"fmt"
	"io"

	"github.com/example/tenantpipeline/internal/localrun/deploy"
)

// noticeEncryption says once, at start, that a customer-managed key (the tenants file's
// "encryption") is accepted but not emulated: the local S3, SQS, Step Functions and DynamoDB store
// everything unencrypted and no KMS call is made. The KMS calls S3, SQS, DynamoDB and Step Functions
// would make for a session, and CloudWatch Logs' for a log group created with the key, are judged
// all the same (kmsauth.go, loggroups.go).
func noticeEncryption(asm *deploy.Assembly, w io.Writer) {
	for _, s := range asm.Stacks {
		for _, r := range s.Resources {
			_, queueKey := r.Properties["KmsMasterKeyId"]
			if r.Type == "AWS::KMS::Key" || r.Type == "AWS::SQS::Queue" && queueKey {
				fmt.Fprintln(w, "localrun: encryption is set; the emulators do not encrypt, and the KMS calls the services would make are judged by the key's policy (and the caller's), not made")
				return
			}
		}
	}
}
