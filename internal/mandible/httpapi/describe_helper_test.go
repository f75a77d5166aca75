package httpapi_test

import (
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
)

// rawDescription is the server's full answer of a DescribeWorkflow call.
func rawDescription(d *client.WorkflowExecutionDescription, err error) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	if err != nil {
		return nil, err
	}
	return d.RawResponse, nil
}
