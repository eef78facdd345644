package controller

import (
	"context"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/example/tenantpipeline/internal/backlog"
	"github.com/example/tenantpipeline/internal/parking"
)

// The pool controller's half of a pooled tenant's bounded backlog (internal/parking): whenever it
// lets a counted message go, it uncounts it, deletes it and feeds the tenant's parked files back;
// and it sweeps the index of tenants with parked files now and then.

// messageDeleter is the SQS client's part the pool controller uses to delete a counted message
// itself, before it feeds a parked file back, so that the tenant never has more than the bound
// in the queue.
type messageDeleter interface {
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
}

var _ messageDeleter = (*sqs.Client)(nil)

// released is the one place a pool controller lets a tenant's message go: the record was not
// reported as a batch item failure, so the event source mapping would delete it. A counted message
// (backlog.AttrMessageID) is uncounted first (a retry after a crash uncounts nothing twice), then
// deleted here, then the tenant's parked files are fed back. false: the message could not be
// uncounted; it is kept (reported as a failure) and comes back, to be released again.
func (p *Pool) released(ctx context.Context, tenant string, rec events.SQSMessage) bool {
	if p.backlog == nil {
		return true
	}
	a, ok := rec.MessageAttributes[backlog.AttrMessageID]
	if !ok || aws.ToString(a.StringValue) == "" {
		return true // not counted: an operator's message
	}
	log := p.log.With("tenant", tenant, "messageId", rec.MessageId)
	if err := p.backlog.Released(ctx, tenant, aws.ToString(a.StringValue)); err != nil {
		log.WarnContext(ctx, "the released message could not be uncounted; it is kept and released again when it comes back", "error", err)
		return false
	}
	// The event source mapping deletes the record again after the invocation. SQS documents that a
	// DeleteMessage with a receipt handle that is not the latest "will still succeed"
	// (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_DeleteMessage.html);
	// it does not say what a second delete of a deleted message answers, nor what the mapping does
	// with a failed delete. Safe either way: the message is gone, so nothing can deliver it again.
	if p.deleter != nil {
		if _, err := p.deleter.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(p.cfg.Shared.QueueURL), ReceiptHandle: aws.String(rec.ReceiptHandle)}); err != nil {
			// The event source mapping deletes it; until then the tenant may have one more
			// message queued than the bound.
			log.WarnContext(ctx, "the released message could not be deleted before its tenant's parked files are fed back", "error", err)
		}
	}
	parking.Drain(ctx, p.backlog, log, tenant)
	return true
}

// sweepParked drains the tenants of the index the controller knows, a page at a time.
func (p *Pool) sweepParked(ctx context.Context) {
	if p.backlog == nil {
		return
	}
	p.sweep.Run(ctx, p.backlog, p.log, func(id string) bool { _, ok := p.cfg.Settings.Entry(id); return ok })
}
