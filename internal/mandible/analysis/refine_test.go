package analysis_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/mandible/analysis"
)

// chatRequest is what the fake endpoint receives.
type chatRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"messages"`
}

// fakeModel is an OpenAI-compatible endpoint answering with handler, recording what it
// was asked.
func fakeModel(t *testing.T, handler http.HandlerFunc) (*httptest.Server, <-chan *http.Request, <-chan chatRequest) {
	t.Helper()
	reqs := make(chan *http.Request, 10)
	bodies := make(chan chatRequest, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body chatRequest
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		reqs <- r
		bodies <- body
		handler(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, reqs, bodies
}

func answer(content string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id":      "chatcmpl-1",
			"object":  "chat.completion",
			"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": content}, "finish_reason": "stop"}},
		})
	}
}

const failedOutput = "+ kubectl rollout status deploy/web\nbash: line 1: kubectl: command not found\n"

func TestRefineReplacesTheSummary(t *testing.T) {
	t.Parallel()
	srv, reqs, bodies := fakeModel(t, answer("  \"kubectl is not installed on the target, so the rollout check could not run.\"\nMore detail.\n"))
	r := analysis.NewRefiner(config.Analysis{ModelURL: srv.URL + "/v1", ModelKey: "sk-test-key", Model: "small-model", Timeout: config.Duration{Duration: 5 * time.Second}})
	require.NotNil(t, r)

	rules := analysis.Classify(failedOutput, 127, false)
	got := r.Refine(context.Background(), failedOutput, rules)

	require.Equal(t, "kubectl is not installed on the target, so the rollout check could not run.", got.Summary)
	require.Equal(t, "model:small-model", got.RefinedBy)
	require.Empty(t, got.Error)
	require.Equal(t, rules.Category, got.Category, "the model refines the summary only")
	require.Equal(t, rules.Suggestion, got.Suggestion)

	req := <-reqs
	require.Equal(t, http.MethodPost, req.Method)
	require.Equal(t, "/v1/chat/completions", req.URL.Path)
	require.Equal(t, "Bearer sk-test-key", req.Header.Get("Authorization"))
	body := <-bodies
	require.Equal(t, "small-model", body.Model)
	require.Len(t, body.Messages, 2)
	require.Equal(t, "system", body.Messages[0].Role)
	require.Equal(t, "user", body.Messages[1].Role)
	require.Contains(t, body.Messages[1].Content, "kubectl: command not found")
	require.Contains(t, body.Messages[1].Content, "command not found: kubectl")
}

func TestRefineUsesAFullEndpointAsIs(t *testing.T) {
	t.Parallel()
	srv, reqs, _ := fakeModel(t, answer("disk full"))
	r := &analysis.Refiner{URL: srv.URL + "/openai/chat/completions", Model: "m"}
	got := r.Refine(context.Background(), "x", analysis.Classify("x", 1, false))
	require.Equal(t, "disk full", got.Summary)
	req := <-reqs
	require.Equal(t, "/openai/chat/completions", req.URL.Path)
	require.Empty(t, req.Header.Get("Authorization"), "no key, no bearer token")
}

func TestRefineFailuresLeaveTheRulesStanding(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		handler http.HandlerFunc
		timeout time.Duration
		err     string
	}{
		{
			name: "server error",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				http.Error(w, `{"error":{"message":"upstream overloaded"}}`, http.StatusInternalServerError)
			},
			err: "model refinement failed: endpoint answered 500 Internal Server Error",
		},
		{
			name: "unauthorized",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				http.Error(w, `{"error":{"message":"invalid api key"}}`, http.StatusUnauthorized)
			},
			err: "endpoint answered 401 Unauthorized",
		},
		{
			name: "timeout",
			handler: func(w http.ResponseWriter, r *http.Request) {
				<-r.Context().Done() // never answers before the client gives up
			},
			timeout: 200 * time.Millisecond,
			err:     "model refinement failed: no answer within 200ms",
		},
		{
			name: "garbage JSON",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{"choices": [{"message": {"content": "half`))
			},
			err: "model refinement failed: answer is not a chat completion",
		},
		{
			name: "no choices",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				_, _ = w.Write([]byte(`{"choices": []}`))
			},
			err: "answer has no choices[0].message.content",
		},
		{
			name:    "empty answer",
			handler: answer(" \n\n  "),
			err:     "model refinement failed: answer is empty",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv, _, _ := fakeModel(t, tt.handler)
			r := &analysis.Refiner{URL: srv.URL, Key: "sk-secret-key", Model: "m", Timeout: tt.timeout}
			rules := analysis.Classify(failedOutput, 127, false)
			got := r.Refine(context.Background(), failedOutput, rules)

			require.Equal(t, rules.Summary, got.Summary, "the rules' summary stands")
			require.Equal(t, rules.Category, got.Category)
			require.Equal(t, analysis.RefinedByRules, got.RefinedBy)
			require.Contains(t, got.Error, tt.err)
			require.NotContains(t, got.Error, "sk-secret-key")
		})
	}
}

func TestRefineUnreachableEndpoint(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	r := &analysis.Refiner{URL: url, Model: "m"}
	rules := analysis.Classify("No space left on device", 1, false)
	got := r.Refine(context.Background(), "No space left on device", rules)
	require.Equal(t, rules.Summary, got.Summary)
	require.Contains(t, got.Error, "model refinement failed")
	require.Contains(t, got.Error, "connection refused")
}

func TestNewRefinerIsOffWithoutAModelURL(t *testing.T) {
	t.Parallel()
	require.Nil(t, analysis.NewRefiner(config.DefaultMandible().Analysis))
}
