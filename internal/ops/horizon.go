package ops

import (
	"context"
	"fmt"
	"io"
	"path"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/spec"
)

// The idempotency horizon at redrive time (docs/data-path.md, "The idempotency horizon"). Register
// records in each segment's progress when the records from its cursor were first sent. A redrive
// re-sends them; if that was longer ago than the core system's idempotencyRetention, the core
// system may have forgotten their keys. Register then looks them up (the core system's lookupUrl);
// without one pipectl refuses the redrive, unless the operator accepts the duplicates
// (--accept-duplicates), which writes the marker Register reads (pipeline.AcceptDuplicatesKey).

// checkHorizon refuses the redrive of execution when a segment's records were first sent longer
// ago than the tenant's core system's idempotencyRetention and the core system has no lookupUrl,
// unless accept is set; with accept it writes the accept-duplicates marker (the audit record) and
// returns its key.
func (o *Ops) checkHorizon(ctx context.Context, t pipeline.TenantOutput, execution, reason string, accept bool) (string, error) {
	cs, err := o.coreSystemOf(ctx, t)
	if err != nil {
		return "", err
	}
	if !accept {
		if cs == nil || cs.LookupURL != "" {
			return "", nil
		}
		keep := spec.CoreSystem{IdempotencyRetention: cs.IdempotencyRetention}.Retention()
		if keep <= 0 {
			return "", nil
		}
		past, err := o.pastHorizon(ctx, t, execution, keep)
		if err != nil || len(past) == 0 {
			return "", err
		}
		return "", refuse("execution %s cannot be redriven: %s, longer ago than core system %s's idempotencyRetention %s; "+
			"it may have forgotten their Idempotency-Keys and would register again the records it has. "+
			"Set the core system's lookupUrl so that Register looks them up first, or redrive with --accept-duplicates",
			execution, strings.Join(past, "; "), cs.Name, keep)
	}
	who, err := o.caller(ctx)
	if err != nil {
		return "", err
	}
	now := o.Now().UTC()
	key := pipeline.AcceptDuplicatesKey(t.Owner(), execution)
	body := fmt.Sprintf("%s\nrequested-by: %s\nrequested-at: %s\n", oneLine("accept duplicates: "+reason), who, now.Format(time.RFC3339))
	if _, err := o.S3.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(t.Bucket), Key: aws.String(key), Body: strings.NewReader(body),
		ContentType: aws.String("text/plain; charset=utf-8"),
		Metadata:    map[string]string{"requested-by": who, "requested-at": now.Format(time.RFC3339)},
	}); err != nil {
		return "", fmt.Errorf("put s3://%s/%s: %w", t.Bucket, key, err)
	}
	return key, nil
}

// pastHorizon lists, as phrases, the segments of execution whose records from the cursor were
// first sent longer than keep ago.
func (o *Ops) pastHorizon(ctx context.Context, t pipeline.TenantOutput, execution string, keep time.Duration) ([]string, error) {
	prefix := path.Join(pipeline.WorkDir(t.Owner()), execution) + "/progress-s"
	var past []string
	in := &s3.ListObjectsV2Input{Bucket: aws.String(t.Bucket), Prefix: aws.String(prefix)}
	for {
		out, err := o.S3.ListObjectsV2(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("list s3://%s/%s (the file's progress): %w", t.Bucket, prefix, err)
		}
		for _, obj := range out.Contents {
			p, err := o.segmentProgress(ctx, t.Bucket, aws.ToString(obj.Key))
			if err != nil {
				return nil, err
			}
			if p == nil || p.SentAt == "" {
				continue
			}
			if age := o.Now().Sub(p.Sent()); age > keep {
				seg := strings.TrimSuffix(strings.TrimPrefix(aws.ToString(obj.Key), prefix), ".json")
				from := fmt.Sprintf("chunk %d", p.Next)
				if p.Record > 0 {
					from = fmt.Sprintf("record %d", p.Record)
				}
				past = append(past, fmt.Sprintf("segment %s's records from %s were first sent at %s (%s ago)",
					seg, from, p.Sent().UTC().Format(time.RFC3339), age.Round(time.Second)))
			}
		}
		if !aws.ToBool(out.IsTruncated) {
			return past, nil
		}
		in.ContinuationToken = out.NextContinuationToken
	}
}

// segmentProgress reads one segment's progress; nil when it does not decode (Register ignores it too).
func (o *Ops) segmentProgress(ctx context.Context, bucket, key string) (*pipeline.Progress, error) {
	out, err := o.S3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		return nil, fmt.Errorf("get s3://%s/%s: %w", bucket, key, err)
	}
	defer out.Body.Close()
	body, err := io.ReadAll(io.LimitReader(out.Body, pipeline.MaxProgressBytes+1))
	if err != nil {
		return nil, fmt.Errorf("get s3://%s/%s: %w", bucket, key, err)
	}
	p, err := pipeline.DecodeProgress(body)
	if err != nil {
		return nil, nil
	}
	return &p, nil
}

// coreSystemOf is the tenant's core system as its controller holds it; nil when it names none.
func (o *Ops) coreSystemOf(ctx context.Context, t pipeline.TenantOutput) (*pipeline.CoreSystem, error) {
	s, err := o.settingsOf(ctx, t)
	if err != nil || s == nil {
		return nil, err
	}
	return s.CoreSystem, nil
}

// settingsOf is the tenant's settings as its controller holds them (a silo's environment, a
// pool's settings file); nil when they cannot be found.
func (o *Ops) settingsOf(ctx context.Context, t pipeline.TenantOutput) (*pipeline.Tenant, error) {
	if t.Pool != "" {
		for _, p := range o.found.pools {
			if p.out.Pool != t.Pool || p.settings == nil {
				continue
			}
			if pt, err := p.settings.Tenant(t.ID); err == nil {
				return &pt.Settings, nil
			}
		}
		return nil, nil
	}
	env, err := o.controllerEnv(ctx, t.ControllerFunction)
	if err != nil {
		return nil, fmt.Errorf("tenant %s: %w", t.ID, err)
	}
	return tenantFromEnv(t, env)
}
