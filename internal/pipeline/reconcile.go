package pipeline

// The admission reconciler's schedule (docs/controller.md, "The reconciler"). A scheduled
// EventBridge rule invokes the controller with this constant input once a period: a pool's
// controller then reconciles its pool gate and the gates of its tenants' core systems, the one
// silo controller chosen for a core system its gate. The rule is one per pool and per core system,
// never per tenant.
// https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-create-rule-schedule.html

// ReconcileInput is the scheduled rule's input, a JSON object that no SQS event (Records) or
// EventBridge event (source, detail-type) can be.
const ReconcileInput = `{"reconcile":true}`

// ReconcileSchedule is the rule's schedule expression: the reconciler's period. EventBridge's
// finest rate is one minute.
const ReconcileSchedule = "rate(1 minute)"
