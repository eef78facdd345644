package ops

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/example/tenantpipeline/internal/pipeline"
)

// Progress is how far a file execution got, read from its history: the records Split counted and
// the segments registered. Segments run one after another, each of SegmentChunks chunks, so at
// least Registered records are registered (segment granularity).
type Progress struct {
	Records    int64 `json:"records"`
	Segments   int   `json:"segments"`
	SegmentsOK int   `json:"segmentsDone"`
	Registered int64 `json:"registeredAtLeast"`
}

// inlineRegisterStates are the Register tasks of a file execution that runs its one segment's loop
// itself (workflows.StateRegister).
var inlineRegisterStates = []string{"Register"}

const (
	// splitHistoryEvents is enough of a history, oldest first, to hold Split's exit: the execution
	// start, the state entered, the Lambda scheduled, started and succeeded, and the state exited.
	splitHistoryEvents = 20
	// maxHistoryPages bounds the history read for the head: 2,500 segments at about 8 events each
	// are 20 pages of 1,000.
	maxHistoryPages = 25
)

// progress reads the execution's history (the first events only, unless all) and returns what it
// can tell, or nil. It is for display: any error leaves it unknown.
// https://docs.aws.amazon.com/step-functions/latest/apireference/API_GetExecutionHistory.html
func (o *Ops) progress(ctx context.Context, arn string, chunkSize int, all bool) *Progress {
	in := &sfn.GetExecutionHistoryInput{ExecutionArn: aws.String(arn), IncludeExecutionData: aws.Bool(true), MaxResults: splitHistoryEvents}
	if all {
		in.MaxResults = 1000
	}
	var p *Progress
	for range maxHistoryPages {
		out, err := o.StepFunctions.GetExecutionHistory(ctx, in)
		if err != nil {
			return nil
		}
		for _, ev := range out.Events {
			switch {
			case ev.Type == sfntypes.HistoryEventTypeTaskStateExited && ev.StateExitedEventDetails != nil &&
				aws.ToString(ev.StateExitedEventDetails.Name) == "Split":
				var state struct {
					Split *pipeline.SplitResult `json:"split"`
				}
				if json.Unmarshal([]byte(aws.ToString(ev.StateExitedEventDetails.Output)), &state) == nil && state.Split != nil {
					p = &Progress{Records: state.Split.Records, Segments: len(state.Split.Segments)}
				}
			case ev.Type == sfntypes.HistoryEventTypeTaskStateExited && ev.StateExitedEventDetails != nil &&
				aws.ToString(ev.StateExitedEventDetails.Name) == "SmallFile":
				// A small file (workflows.StateSmallFile) has no Split state: the task leaves its
				// records at $.split.records when it succeeds, every one of them registered, as one
				// segment. A file it handed on leaves the state as it was, and Split follows.
				var state struct {
					Split *struct {
						Records *int64 `json:"records"`
					} `json:"split"`
				}
				if json.Unmarshal([]byte(aws.ToString(ev.StateExitedEventDetails.Output)), &state) == nil && state.Split != nil && state.Split.Records != nil {
					p = &Progress{Records: *state.Split.Records, Segments: 1, SegmentsOK: 1}
				}
			case ev.Type == sfntypes.HistoryEventTypeMapIterationSucceeded && p != nil:
				p.SegmentsOK++
			case ev.Type == sfntypes.HistoryEventTypeTaskStateExited && ev.StateExitedEventDetails != nil && p != nil &&
				slices.Contains(inlineRegisterStates, aws.ToString(ev.StateExitedEventDetails.Name)):
				// A file of one segment runs the segment's Register loop itself: the segment is done
				// when a Register task hands on a cursor that says so.
				var state struct {
					Split struct {
						Cursor *pipeline.Cursor `json:"cursor"`
					} `json:"split"`
				}
				if json.Unmarshal([]byte(aws.ToString(ev.StateExitedEventDetails.Output)), &state) == nil && state.Split.Cursor != nil && state.Split.Cursor.Done {
					p.SegmentsOK++
				}
			}
		}
		if !all || aws.ToString(out.NextToken) == "" {
			break
		}
		in.NextToken = out.NextToken
	}
	if p != nil {
		p.Registered = min(p.Records, int64(p.SegmentsOK)*pipeline.SegmentChunks*int64(chunkSize))
	}
	return p
}
