package localrun

import (
	"fmt"
	"io"

	"github.com/example/tenantpipeline/internal/localrun/deploy"
)

// noticeEncryption says once, at start, that a customer-managed key (the tenants file's
// "encryption") is accepted but not emulated: the local S3, SQS, Step Functions and DynamoDB store
// everything unencrypted and no KMS call is made. The KMS calls S3 and SQS would make for a
// session are judged all the same (kmsauth.go); those of Step Functions, DynamoDB and CloudWatch
// Logs are not.
func noticeEncryption(asm *deploy.Assembly, w io.Writer) {
	for _, s := range asm.Stacks {
		for _, r := range s.Resources {
			_, queueKey := r.Properties["KmsMasterKeyId"]
			if r.Type == "AWS::KMS::Key" || r.Type == "AWS::SQS::Queue" && queueKey {
				fmt.Fprintln(w, "localrun: encryption is set; the emulators do not encrypt, and of the KMS calls only those S3 and SQS make for a role are judged, by the key's policy and the role's")
				return
			}
		}
	}
}
