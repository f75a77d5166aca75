package workers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/mantis-deploy/mantis/internal/config"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
)

// The namespace start-up check: Mandible's first start on a fresh namespace of any
// Temporal (dev server, a self-hosted cluster, Temporal Cloud) either succeeds or
// stops with a message that says what to run.

const (
	// probeWorkflowType is a type no worker polls for: the probe only needs the
	// server to accept its start, which it does once every attribute is mapped.
	probeWorkflowType  = "mantis.SearchAttributeProbe"
	probeTaskQueue     = "mantis-search-attribute-probe"
	probeTimeout       = time.Minute
	probeRetryInterval = 500 * time.Millisecond
)

// NamespaceSetup describes the start-up check of the namespace Mandible runs in.
type NamespaceSetup struct {
	Client    client.Client
	Namespace string
	// Keys are the custom search attributes Mantis's workflows set.
	Keys []temporal.SearchAttributeKey
	// Mode is config.SearchAttributesRegister or config.SearchAttributesCheck.
	Mode string
	// Wait bounds the wait for the namespace to accept newly registered attributes.
	Wait   time.Duration
	Logger *slog.Logger
}

// PrepareNamespace checks that the namespace exists and that Mantis's search
// attributes are usable in it. In register mode it adds the missing ones, then waits
// until a workflow start that sets every one of them is accepted: a real cluster
// lists an attribute before its namespace cache maps it, and a start in between fails.
// In check mode a missing attribute stops start-up with the commands that add it;
// present ones are waited for in the same way.
func PrepareNamespace(ctx context.Context, s NamespaceSetup) error {
	if err := checkNamespace(ctx, s); err != nil {
		return err
	}
	deadline := time.Now().Add(s.Wait)
	var missing []temporal.SearchAttributeKey
	err := whileNotServed(ctx, s, deadline, func() (err error) {
		missing, err = missingSearchAttributes(ctx, s)
		return err
	})
	if err != nil {
		return err
	}
	switch {
	case len(missing) == 0:
	case s.Mode == config.SearchAttributesCheck:
		return errors.New(missingAttributesMessage(s.Namespace, missing))
	default:
		if err := registerSearchAttributes(ctx, s, missing); err != nil {
			return err
		}
	}
	// Attributes just added, by this replica, another one or an operator, are listed
	// before the namespace maps them.
	return waitForSearchAttributes(ctx, s, deadline)
}

// whileNotServed calls f again, until deadline, while it fails because the namespace
// is not served yet: one just created is described from the database at once but
// reaches the frontends' namespace caches after a while (seconds on a real cluster).
func whileNotServed(ctx context.Context, s NamespaceSetup, deadline time.Time, f func() error) error {
	logged := false
	for {
		err := f()
		var notFound *serviceerror.NamespaceNotFound
		if !errors.As(err, &notFound) || time.Now().After(deadline) {
			return err
		}
		if !logged {
			s.Logger.InfoContext(ctx, "waiting for a namespace just created to be served", "namespace", s.Namespace, "limit", s.Wait)
			logged = true
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(probeRetryInterval):
		}
	}
}

// checkNamespace fails when the namespace does not exist, naming the command that
// creates it: Mantis creates namespaces only in its dev stack.
func checkNamespace(ctx context.Context, s NamespaceSetup) error {
	_, err := s.Client.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: s.Namespace})
	var notFound *serviceerror.NamespaceNotFound
	switch {
	case errors.As(err, &notFound):
		return fmt.Errorf("temporal namespace %q does not exist; Mantis does not create namespaces. Create it with:\n"+
			"  temporal operator namespace create --namespace %s --retention 72h\n"+
			"or, on Temporal Cloud, in the Cloud UI (Namespaces > Create Namespace) or with tcld namespace create",
			s.Namespace, s.Namespace)
	case err != nil:
		return fmt.Errorf("describing temporal namespace %q: %w", s.Namespace, err)
	}
	return nil
}

// missingSearchAttributes lists the keys the namespace lacks. An attribute that
// exists with another type is an error: Mantis cannot use it, and changing it is the
// operator's decision.
func missingSearchAttributes(ctx context.Context, s NamespaceSetup) ([]temporal.SearchAttributeKey, error) {
	have, err := s.Client.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: s.Namespace})
	if err != nil {
		return nil, fmt.Errorf("listing the search attributes of namespace %q: %w", s.Namespace, err)
	}
	var missing []temporal.SearchAttributeKey
	for _, k := range s.Keys {
		got, ok := have.GetCustomAttributes()[k.GetName()]
		switch {
		case !ok:
			missing = append(missing, k)
		case got != k.GetValueType():
			return nil, fmt.Errorf("search attribute %s of namespace %q is of type %s; Mantis needs %s",
				k.GetName(), s.Namespace, typeName(got), typeName(k.GetValueType()))
		}
	}
	return missing, nil
}

func registerSearchAttributes(ctx context.Context, s NamespaceSetup, missing []temporal.SearchAttributeKey) error {
	add := make(map[string]enumspb.IndexedValueType, len(missing))
	for _, k := range missing {
		add[k.GetName()] = k.GetValueType()
	}
	s.Logger.InfoContext(ctx, "registering search attributes", "namespace", s.Namespace, "attributes", names(missing))
	_, err := s.Client.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace: s.Namespace, SearchAttributes: add,
	})
	var (
		exists *serviceerror.AlreadyExists
		denied *serviceerror.PermissionDenied
	)
	switch {
	case errors.As(err, &exists):
		return nil // another replica added them first
	case errors.As(err, &denied):
		return fmt.Errorf("registering search attributes %s in namespace %q: Temporal refused Mandible's identity "+
			"(permission denied: %w); adding search attributes needs the admin role on the namespace. "+
			"Give Mandible's key or certificate that role, or have an admin add them and set "+
			"temporal.search_attributes = %q:\n%s",
			strings.Join(names(missing), ", "), s.Namespace, err, config.SearchAttributesCheck,
			missingAttributesMessage(s.Namespace, missing))
	case err != nil:
		return fmt.Errorf("registering search attributes %s in namespace %q: %w\n%s",
			strings.Join(names(missing), ", "), s.Namespace, err, missingAttributesMessage(s.Namespace, missing))
	}
	return nil
}

// waitForSearchAttributes starts a probe workflow that sets every attribute until
// the server accepts it, until deadline, and terminates the probe at once.
func waitForSearchAttributes(ctx context.Context, s NamespaceSetup, deadline time.Time) error {
	logged := false
	for {
		err := probeSearchAttributes(ctx, s)
		if err == nil {
			if logged {
				s.Logger.InfoContext(ctx, "namespace accepts the search attributes", "namespace", s.Namespace)
			}
			return nil
		}
		attribute, unmapped := unmappedAttribute(err)
		var notFound *serviceerror.NamespaceNotFound
		if errors.As(err, &notFound) {
			// A namespace just created reaches the frontends' caches after a while.
			attribute, unmapped = "(namespace not yet served)", true
		}
		if !unmapped {
			return fmt.Errorf("checking the search attributes of namespace %q with a probe workflow: %w", s.Namespace, err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("namespace %q did not accept search attribute %s within %s (temporal.search_attributes_wait): %w",
				s.Namespace, attribute, s.Wait, err)
		}
		if !logged {
			s.Logger.InfoContext(ctx, "waiting for the namespace to map a search attribute it has just registered",
				"namespace", s.Namespace, "attribute", attribute, "limit", s.Wait)
			logged = true
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(probeRetryInterval):
		}
	}
}

// probeSearchAttributes starts a workflow that sets every attribute, and
// terminates it: no worker polls its task queue, so it never runs.
func probeSearchAttributes(ctx context.Context, s NamespaceSetup) error {
	updates := make([]temporal.SearchAttributeUpdate, 0, len(s.Keys))
	for _, k := range s.Keys {
		update, err := probeValue(k)
		if err != nil {
			return err
		}
		updates = append(updates, update)
	}
	id := "mantis-search-attribute-probe-" + uuid.NewString()
	run, err := s.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: id, TaskQueue: probeTaskQueue, WorkflowExecutionTimeout: probeTimeout,
		TypedSearchAttributes: temporal.NewSearchAttributes(updates...),
	}, probeWorkflowType)
	if err != nil {
		return err
	}
	if err := s.Client.TerminateWorkflow(ctx, id, run.GetRunID(), "search attribute probe: the start was accepted"); err != nil {
		s.Logger.WarnContext(ctx, "terminating the search attribute probe failed; it times out by itself",
			"workflow_id", id, "timeout", probeTimeout, "err", err)
	}
	return nil
}

// probeValue is a value of the key's type.
func probeValue(k temporal.SearchAttributeKey) (temporal.SearchAttributeUpdate, error) {
	switch key := k.(type) {
	case temporal.SearchAttributeKeyKeyword:
		return key.ValueSet("probe"), nil
	case temporal.SearchAttributeKeyString:
		return key.ValueSet("probe"), nil
	case temporal.SearchAttributeKeyInt64:
		return key.ValueSet(0), nil
	case temporal.SearchAttributeKeyBool:
		return key.ValueSet(false), nil
	case temporal.SearchAttributeKeyTime:
		return key.ValueSet(time.Unix(0, 0)), nil
	case temporal.SearchAttributeKeyFloat64:
		return key.ValueSet(0), nil
	default:
		return nil, fmt.Errorf("search attribute %s: no probe value for type %s", k.GetName(), typeName(k.GetValueType()))
	}
}

// unmappedAttribute reports whether err is the server refusing a start because a
// search attribute has no mapping yet, and names the attribute.
func unmappedAttribute(err error) (string, bool) {
	var invalid *serviceerror.InvalidArgument
	if !errors.As(err, &invalid) {
		return "", false
	}
	msg := invalid.Error()
	const marker = "no mapping defined for search attribute "
	if i := strings.Index(msg, marker); i >= 0 {
		return strings.Fields(msg[i+len(marker):] + " ?")[0], true
	}
	if strings.Contains(msg, "search attribute") && (strings.Contains(msg, "not defined") || strings.Contains(msg, "mapping")) {
		return "(named in the error)", true
	}
	return "", false
}

// missingAttributesMessage says how to add the missing attributes, with the
// temporal CLI or on Temporal Cloud.
func missingAttributesMessage(namespace string, missing []temporal.SearchAttributeKey) string {
	var b strings.Builder
	fmt.Fprintf(&b, "namespace %q lacks the search attributes %s that Mantis needs. Add them with:\n",
		namespace, strings.Join(names(missing), ", "))
	for _, k := range missing {
		fmt.Fprintf(&b, "  temporal operator search-attribute create --namespace %s --name %s --type %s\n",
			namespace, k.GetName(), typeName(k.GetValueType()))
	}
	b.WriteString("or, on Temporal Cloud (namespace <name>.<account>):\n")
	for _, k := range missing {
		fmt.Fprintf(&b, "  tcld namespace search-attributes add --namespace %s.<account> --search-attribute %q\n",
			namespace, k.GetName()+"="+typeName(k.GetValueType()))
	}
	b.WriteString("(or in the Cloud UI: Namespaces > the namespace > Edit > Custom Search Attributes)")
	return b.String()
}

func names(keys []temporal.SearchAttributeKey) []string {
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, k.GetName())
	}
	slices.Sort(out)
	return out
}

// typeName is the type as the temporal CLI spells it (Keyword, Text, Int, ...).
func typeName(t enumspb.IndexedValueType) string {
	switch t {
	case enumspb.INDEXED_VALUE_TYPE_KEYWORD:
		return "Keyword"
	case enumspb.INDEXED_VALUE_TYPE_TEXT:
		return "Text"
	case enumspb.INDEXED_VALUE_TYPE_INT:
		return "Int"
	case enumspb.INDEXED_VALUE_TYPE_DOUBLE:
		return "Double"
	case enumspb.INDEXED_VALUE_TYPE_BOOL:
		return "Bool"
	case enumspb.INDEXED_VALUE_TYPE_DATETIME:
		return "Datetime"
	case enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST:
		return "KeywordList"
	default:
		return t.String()
	}
}
