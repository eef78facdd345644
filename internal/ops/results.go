package ops

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/results"
)

// maxSummaryBytes bounds a summary.json read: a summary is a few hundred bytes.
const maxSummaryBytes = 1 << 20

// summary reads the summary.json of one file execution of the tenant; nil when there is none.
func (o *Ops) summary(ctx context.Context, t pipeline.TenantOutput, execution string) (*results.Summary, error) {
	key := results.Key(t.Owner(), execution, results.SummaryFile)
	out, err := o.S3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(t.Bucket), Key: aws.String(key)})
	if _, nk := errorsAs[*s3types.NoSuchKey](err); nk {
		return nil, nil
	}
	if _, nf := errorsAs[*s3types.NotFound](err); nf {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get s3://%s/%s: %w", t.Bucket, key, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(io.LimitReader(out.Body, maxSummaryBytes))
	if err != nil {
		return nil, fmt.Errorf("read s3://%s/%s: %w", t.Bucket, key, err)
	}
	var s results.Summary
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("s3://%s/%s: %w", t.Bucket, key, err)
	}
	return &s, nil
}

// ResultsReport is what became of one file execution: its summary.json, and the results files
// downloaded (pipectl results --out).
type ResultsReport struct {
	Tenant    string `json:"tenant"`
	Execution string `json:"execution"`
	// Key is the object key the argument was read as, "" when it was an execution name; Note says
	// how it was read when not as it stood (ResultsRef).
	Key     string          `json:"key,omitempty"`
	Note    string          `json:"note,omitempty"`
	Summary results.Summary `json:"summary"`
	// Raw is summary.json as stored.
	Raw json.RawMessage `json:"-"`
	// OutOfOrder is the file's out-of-order audit record (results.OutOfOrderFile), when an
	// operator ran it after later files of the tenant; nil otherwise.
	OutOfOrder *results.OutOfOrder `json:"outOfOrder,omitempty"`
	// Downloaded are the local paths of the files written under the --out folder.
	Downloaded []string `json:"downloaded,omitempty"`
}

// executionName is the form of every file execution name the controller gives: 1 to 80 of
// A-Z, a-z, 0-9, "-" and "_" (internal/controller/naming.go; a replay's is "replay-" and a request
// id). An object key with a "/" or a "." (a file extension) cannot be one.
var executionName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,80}$`)

// ResultsRef is what pipectl results read its argument as: an execution name, or a file's object
// key. A tenant's files are all under its prefix, so a file name without a "/" is read as the
// key under the prefix, and a key with a "/" outside the prefix is refused: no execution of the
// tenant read it.
type ResultsRef struct {
	Execution string
	Key       string
	// Note says how the argument was read when it was not taken as it stands; "" otherwise.
	Note string
}

// ReadResultsRef reads pipectl results' argument for a tenant whose files are under prefix.
func ReadResultsRef(tenant, prefix, ref string) (ResultsRef, error) {
	switch {
	case executionName.MatchString(ref):
		return ResultsRef{Execution: ref}, nil
	case strings.HasPrefix(ref, prefix):
		return ResultsRef{Key: ref}, nil
	case strings.Contains(ref, "/"):
		return ResultsRef{}, refuse("%q is read as a file's key (it is no execution name: those are 1-80 of A-Z a-z 0-9 - _), "+
			"and it is not under tenant %s's prefix %s, where all of its files are", ref, tenant, prefix)
	}
	key := prefix + ref
	return ResultsRef{Key: key, Note: fmt.Sprintf("%q is read as a file's key (it is no execution name: those are 1-80 of A-Z a-z 0-9 - _), "+
		"under tenant %s's prefix: %s", ref, tenant, key)}, nil
}

// Results reads the summary of the tenant's file execution ref (ReadResultsRef): an execution
// name, or an object key whose newest execution among the tenant's newest 1,000 is taken. With
// outDir it downloads the results files the summary names there.
func (o *Ops) Results(ctx context.Context, id, ref, outDir string) (ResultsReport, error) {
	t, err := o.Tenant(ctx, id)
	if err != nil {
		return ResultsReport{}, err
	}
	r, err := ReadResultsRef(t.ID, t.Prefix, ref)
	if err != nil {
		return ResultsReport{}, err
	}
	execution := r.Execution
	if r.Key != "" {
		if execution, err = o.executionOfKey(ctx, t, r.Key); err != nil {
			if r.Note != "" {
				err = fmt.Errorf("%w (%s)", err, r.Note)
			}
			return ResultsReport{}, err
		}
	}
	key := results.Key(t.Owner(), execution, results.SummaryFile)
	body, found, err := o.object(ctx, t.Bucket, key)
	if err != nil {
		return ResultsReport{}, err
	}
	if !found {
		why := fmt.Sprintf("the file's execution %s has not ended, or ended before results were written", execution)
		if r.Key == "" {
			why = fmt.Sprintf("%q is read as an execution name, and that execution has not ended, ended before results were written, or does not exist; "+
				"if it is a file's name, give its key, %s%s", ref, t.Prefix, ref)
		}
		return ResultsReport{}, fmt.Errorf("no s3://%s/%s: %s", t.Bucket, key, why)
	}
	rep := ResultsReport{Tenant: t.ID, Execution: execution, Key: r.Key, Note: r.Note, Raw: body}
	if err := json.Unmarshal(body, &rep.Summary); err != nil {
		return ResultsReport{}, fmt.Errorf("s3://%s/%s: %w", t.Bucket, key, err)
	}
	oooKey := results.Key(t.Owner(), execution, results.OutOfOrderFile)
	if b, found, err := o.object(ctx, t.Bucket, oooKey); err != nil {
		return ResultsReport{}, err
	} else if found {
		var ooo results.OutOfOrder
		if err := json.Unmarshal(b, &ooo); err != nil {
			return ResultsReport{}, fmt.Errorf("s3://%s/%s: %w", t.Bucket, oooKey, err)
		}
		rep.OutOfOrder = &ooo
	}
	if outDir == "" {
		return rep, nil
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return rep, err
	}
	fs := rep.Summary.Files
	for _, uri := range []string{fs.Summary, fs.Rejected, fs.RejectedNotCSV, fs.Unprocessed} {
		bucket, k, ok := strings.Cut(strings.TrimPrefix(uri, "s3://"), "/")
		if uri == "" || !ok || bucket != t.Bucket || !strings.HasPrefix(k, results.Dir(t.Owner(), execution)) {
			continue // only the tenant's own results folder
		}
		b, found, err := o.object(ctx, bucket, k)
		if err != nil {
			return rep, err
		}
		if !found {
			continue
		}
		p := filepath.Join(outDir, path.Base(k))
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return rep, err
		}
		rep.Downloaded = append(rep.Downloaded, p)
	}
	return rep, nil
}

// executionOfKey is the newest of the tenant's newest 1,000 executions whose input names key.
func (o *Ops) executionOfKey(ctx context.Context, t pipeline.TenantOutput, key string) (string, error) {
	execs, err := o.executions(ctx, t, "", 1000)
	if err != nil {
		return "", fmt.Errorf("list executions: %w", err)
	}
	for _, e := range execs {
		d, err := o.describe(ctx, aws.ToString(e.ExecutionArn))
		if err != nil {
			return "", err
		}
		if inputKey(d) == key {
			return aws.ToString(e.Name), nil
		}
	}
	return "", fmt.Errorf("no execution of tenant %s read %s (among its newest 1,000)", t.ID, key)
}

// object reads a whole object; found is false when there is none.
func (o *Ops) object(ctx context.Context, bucket, key string) ([]byte, bool, error) {
	out, err := o.S3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if _, nk := errorsAs[*s3types.NoSuchKey](err); nk {
		return nil, false, nil
	}
	if _, nf := errorsAs[*s3types.NotFound](err); nf {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("get s3://%s/%s: %w", bucket, key, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		return nil, false, fmt.Errorf("read s3://%s/%s: %w", bucket, key, err)
	}
	return b, true, nil
}
