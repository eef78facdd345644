package localrun

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/example/tenantpipeline/internal/localrun/report"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/results"
	"github.com/example/tenantpipeline/internal/sequence"
	"github.com/example/tenantpipeline/spec"
)

// A sequenced tenant (spec.Sequence) as the run sees it: its place in the sequence and its held
// files, read from the bucket as the controller left them (internal/sequence), and its refused
// files, read from their summary.json. The run only reads; the controller decides.

// SequenceRule is the tenant's sequence rule, read from its settings; ok is false for a tenant
// without a sequence (or with one the run cannot read, which the synth would have refused).
func (t *Tenant) SequenceRule() (rule spec.SequenceRule, ok bool) {
	raw, found := t.Config["sequence"]
	if !found || raw == nil {
		return spec.SequenceRule{}, false
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return spec.SequenceRule{}, false
	}
	var s spec.Sequence
	if json.Unmarshal(b, &s) != nil {
		return spec.SequenceRule{}, false
	}
	rule, err = s.Compile()
	return rule, err == nil
}

// SequenceValue is the sequence value a sequenced tenant's object key carries, as operators see
// it (a number without its zeros); ok is false when the key's name does not match the pattern.
func (t *Tenant) SequenceValue(key string) (v spec.SequenceValue, ok bool) {
	rule, seq := t.SequenceRule()
	if !seq {
		return spec.SequenceValue{}, false
	}
	return rule.Value(strings.TrimPrefix(key, t.Prefix))
}

// display is v as operators see it.
func display(kind string, v spec.SequenceValue) string {
	return sequence.Display(kind, sequence.Entry{Value: v.Text, Num: v.Num})
}

// sequenceStore is the tenant's sequence objects in the run's bucket, read through the harness's
// own (uncounted) S3 endpoint.
func (r *Run) sequenceStore(t *Tenant, rule spec.SequenceRule) sequence.Store {
	return sequence.Store{S3: r.s3, Bucket: r.Bucket, Pool: t.KeysPool, Tenant: t.ID, Kind: rule.Kind}
}

// Sequence reads a sequenced tenant's state and its held files (at most limit values, and their
// count), as the controller wrote them.
func (r *Run) Sequence(ctx context.Context, tenant string, limit int) (sequence.State, sequence.Listed, error) {
	t := r.Tenant(tenant)
	if t == nil {
		return sequence.State{}, sequence.Listed{}, fmt.Errorf("no tenant %q", tenant)
	}
	rule, ok := t.SequenceRule()
	if !ok {
		return sequence.State{}, sequence.Listed{}, fmt.Errorf("tenant %s has no sequence", tenant)
	}
	store := r.sequenceStore(t, rule)
	st, _, err := store.Load(ctx, sequence.New(rule))
	if err != nil {
		return sequence.State{}, sequence.Listed{}, err
	}
	held, err := store.List(ctx, limit)
	return st, held, err
}

// sequenceReport is the tenant's place in its sequence for the report, and the values of its
// held files (at most limit).
func (r *Run) sequenceReport(ctx context.Context, t *Tenant, rule spec.SequenceRule, limit int) (*report.SequenceReport, []string, error) {
	st, held, err := r.Sequence(ctx, t.ID, limit)
	if err != nil {
		return nil, nil, err
	}
	sr := &report.SequenceReport{Kind: rule.Kind, OnGap: rule.OnGap, Held: held.Count, GapSince: st.GapSince, Skipped: len(st.Skipped)}
	if rule.Kind == spec.SequenceNumber {
		sr.Next = fmt.Sprint(st.Next)
	} else {
		sr.Next = st.Last
	}
	if len(held.Values) > 0 {
		sr.HeldFirst = held.Values[0]
	}
	return sr, held.Values, nil
}

// refusedSummaries are the REFUSED summaries of the tenant's files, read from results/<tenant>/
// for the executions not in started (which ran, so were not refused). A refusal is final, so each
// is read once and kept.
func (r *Run) refusedSummaries(ctx context.Context, t *Tenant, started map[string]bool) []results.Summary {
	prefix := pipeline.ResultsDir(t.Owner())
	p := s3.NewListObjectsV2Paginator(r.s3, &s3.ListObjectsV2Input{Bucket: aws.String(r.Bucket), Prefix: aws.String(prefix)})
	var names []string
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			break // the report shows what it could read; the next snapshot tries again
		}
		for _, o := range out.Contents {
			exec, file, ok := strings.Cut(strings.TrimPrefix(aws.ToString(o.Key), prefix), "/")
			if ok && file == results.SummaryFile && !started[exec] {
				names = append(names, exec)
			}
		}
	}
	var out []results.Summary
	for _, exec := range names {
		r.mu.Lock()
		s, known := r.refused[exec]
		r.mu.Unlock()
		if !known {
			got, err := r.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(r.Bucket), Key: aws.String(results.Key(t.Owner(), exec, results.SummaryFile))})
			if err != nil {
				continue
			}
			err = json.NewDecoder(got.Body).Decode(&s)
			got.Body.Close()
			if err != nil || s.Status != results.StatusRefused {
				continue // an execution's summary written before its start was seen; not a refusal
			}
			r.mu.Lock()
			if r.refused == nil {
				r.refused = map[string]results.Summary{}
			}
			r.refused[exec] = s
			r.mu.Unlock()
		}
		out = append(out, s)
	}
	return out
}

// fillSequence marks a sequenced tenant's files without an execution: REFUSED with the reason
// from a refusal summary naming the file's object, HELD when a file is held under its value; and
// gives every file its value.
func (r *Run) fillSequence(ctx context.Context, t *Tenant, rule spec.SequenceRule, tr *report.TenantReport) {
	started := map[string]bool{}
	waiting := 0
	for i := range tr.Files {
		f := &tr.Files[i]
		if v, ok := rule.Value(strings.TrimPrefix(f.Key, t.Prefix)); ok {
			f.Sequence = display(rule.Kind, v)
		}
		if f.ExecutionName != "" {
			started[f.ExecutionName] = true
		} else {
			waiting++
		}
	}
	sr, heldValues, err := r.sequenceReport(ctx, t, rule, len(tr.Files))
	if err == nil {
		tr.Sequence = sr
	}
	if waiting == 0 {
		return
	}
	refusals := r.refusedSummaries(ctx, t, started)
	for i := range tr.Files {
		f := &tr.Files[i]
		if f.ExecutionName != "" {
			continue
		}
		u := &Upload{Key: f.Key, VersionID: f.VersionID, ETag: f.ETag}
		if j := slices.IndexFunc(refusals, func(s results.Summary) bool { return refusalNames(s, u, r.eventKey(u.Key)) }); j >= 0 {
			f.Status, f.Refusal, f.ExecutionName = report.StatusRefused, refusals[j].Refusal, refusals[j].Execution
			refusals = slices.Delete(refusals, j, j+1) // one refusal per upload
			continue
		}
		if f.Sequence != "" && slices.Contains(heldValues, f.Sequence) {
			f.Status = report.StatusHeld
		}
	}
}

// refusalNames reports whether a refusal is about the uploaded object version (the key as the
// event carried it, or as written).
func refusalNames(s results.Summary, u *Upload, eventKey string) bool {
	if s.Source.Key != u.Key && s.Source.Key != eventKey {
		return false
	}
	return u.VersionID == "" || s.Source.Version == "" || s.Source.Version == u.VersionID
}

// sequenceOrder is the tenant's files in the order its sequence runs them (by value; files
// without one, or refused, are left out), for the order checks.
func sequenceOrder(rule spec.SequenceRule, prefix string, files []report.FileReport) []report.FileReport {
	type valued struct {
		v spec.SequenceValue
		f report.FileReport
	}
	var out []valued
	for _, f := range files {
		v, ok := rule.Value(strings.TrimPrefix(f.Key, prefix))
		if !ok || f.Status == report.StatusRefused {
			continue
		}
		out = append(out, valued{v, f})
	}
	slices.SortStableFunc(out, func(a, b valued) int {
		if rule.Kind == spec.SequenceNumber {
			return cmp.Compare(a.v.Num, b.v.Num)
		}
		return strings.Compare(a.v.Text, b.v.Text)
	})
	files = make([]report.FileReport, len(out))
	for i, x := range out {
		files[i] = x.f
	}
	return files
}

// tickDepth is the messages of the tenant's sequence tick in its queue (pipeline.TickGroup):
// the pipeline's own timer, not a file.
func (c *Cloud) tickDepth(ctx context.Context, t *Tenant) (int, error) {
	groups, err := c.groupDepths(ctx, t.Queue)
	if err != nil {
		return 0, err
	}
	return groups[pipeline.TickGroup(t.ID)], nil
}
