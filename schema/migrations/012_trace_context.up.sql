-- Trace context of a command, so that one deployment is one trace across processes.
-- trace_parent is the W3C traceparent of the span that enqueued the request (the
-- deployment's AdvanceStep activity, or the API call of an ad-hoc request); the
-- delivery copies it onto the command row, and Thorax continues the trace from the row
-- when it claims the command. A broker nudge carries it too, but a command claimed by
-- polling never sees its nudge, so the row is what holds it. NULL is a request made
-- without tracing.
ALTER TABLE pending_dispatch_requests ADD COLUMN trace_parent text CHECK (trace_parent <> '');
ALTER TABLE command_queue ADD COLUMN trace_parent text CHECK (trace_parent <> '');
