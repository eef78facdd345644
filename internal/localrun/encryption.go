package localrun

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"

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

// keyARN matches a KMS key's ARN in a store's properties.
var keyARN = regexp.MustCompile(`arn:aws[a-z-]*:kms:[a-z0-9-]+:[0-9]{12}:key/[A-Za-z0-9-]+`)

// noticeImportedKeys says, once per key, that a key the templates name and do not create (an
// imported key: the tenants file's keyArn) is judged by the policy synth asked its owner to
// write, not by its real one (importedKeyPolicy, kmsauth.go).
func noticeImportedKeys(asm *deploy.Assembly, res *deploy.Resolver, w io.Writer) {
	created := map[string]bool{}
	for _, k := range asm.OfType("AWS::KMS::Key") {
		if arn, err := res.ResolveString(k.Stack, json.RawMessage(fmt.Sprintf(`{"Fn::GetAtt":[%q,"Arn"]}`, k.LogicalID))); err == nil {
			created[arn] = true
		}
	}
	said := map[string]bool{}
	for _, typ := range slices.Sorted(maps.Keys(keyProperties)) {
		for _, r := range asm.OfType(typ) {
			var v any
			if asm.Prop(res, r, keyProperties[typ], &v) != nil {
				continue
			}
			b, _ := json.Marshal(v)
			for _, key := range keyARN.FindAllString(string(b), -1) {
				if !created[key] && !said[key] {
					said[key] = true
					fmt.Fprintf(w, "localrun: key %s is imported: its uses are judged by the policy synth asks its owner to write (the account's statement and the pipeline's service statements), not by its real policy\n", key)
				}
			}
		}
	}
}
