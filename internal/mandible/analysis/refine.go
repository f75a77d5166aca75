package analysis

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode"

	"github.com/mantis-deploy/mantis/internal/config"
)

// Refiner asks an OpenAI-compatible chat-completions endpoint to rewrite the rules'
// summary of a failure. It only ever improves a result: whatever goes wrong, the rules'
// summary stands and the result says why.
//
// The command's output is sent to the endpoint: configure one that may see it.
type Refiner struct {
	// URL is the endpoint: a base URL ("https://api.example.com/v1") gets
	// /chat/completions appended; a URL already ending in /chat/completions is used as is.
	URL string
	// Key, when set, is sent as a bearer token.
	Key   string
	Model string
	// Timeout bounds one refinement, the answer included; zero means DefaultRefineTimeout.
	Timeout time.Duration
	// Client is the HTTP client; nil means http.DefaultClient.
	Client *http.Client
}

// DefaultRefineTimeout bounds a refinement when the configuration names no timeout.
const DefaultRefineTimeout = 10 * time.Second

// maxPromptOutput is how much of the end of a command's output goes to the model.
const maxPromptOutput = 8 << 10

// maxSummary bounds a model's summary, in runes.
const maxSummary = 300

// NewRefiner returns the refiner the [analysis] section configures, or nil when
// analysis.model_url is empty (refinement off).
func NewRefiner(cfg config.Analysis) *Refiner {
	if !cfg.Enabled() {
		return nil
	}
	return &Refiner{URL: cfg.ModelURL, Key: cfg.ModelKey, Model: cfg.Model, Timeout: cfg.Timeout.Duration}
}

// RefinedBy is what a refined result's refined_by says: "model:<model>".
func (r *Refiner) RefinedBy() string { return "model:" + r.Model }

const systemPrompt = `You explain why a command run by a deployment tool on a server failed.
Answer with exactly one line of at most 200 characters: the cause of the failure, naming the
offending command, file, host, package or credential when the output shows it.
No preamble, no quotes, no markdown, no suggestion.`

// Refine returns res with the model's one-line summary and RefinedBy set to the model;
// on any failure (transport error, timeout, a status other than 2xx, an answer that is
// not a chat completion or is empty) it returns res unchanged but for Error, which says
// why.
func (r *Refiner) Refine(ctx context.Context, output string, res Result) Result {
	summary, err := r.complete(ctx, output, res)
	if err != nil {
		res.Error = "model refinement failed: " + err.Error()
		return res
	}
	res.Summary, res.RefinedBy, res.Error = summary, r.RefinedBy(), ""
	return res
}

type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type chatRequest struct {
	Model    string        `json:"model"`
	Messages []chatMessage `json:"messages"`
}

type chatResponse struct {
	Choices []struct {
		Message struct {
			Content *string `json:"content"`
		} `json:"message"`
	} `json:"choices"`
}

func (r *Refiner) complete(ctx context.Context, output string, res Result) (string, error) {
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = DefaultRefineTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	if len(output) > maxPromptOutput {
		output = strings.ToValidUTF8(output[len(output)-maxPromptOutput:], "")
	}
	body, err := json.Marshal(chatRequest{
		Model: r.Model,
		Messages: []chatMessage{
			{Role: "system", Content: systemPrompt},
			{Role: "user", Content: fmt.Sprintf("Rule-based category: %s\nRule-based summary: %s\n\nEnd of the command's output:\n%s",
				res.Category, res.Summary, output)},
		},
	})
	if err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.endpoint(), bytes.NewReader(body))
	if err != nil {
		return "", fmt.Errorf("building request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if r.Key != "" {
		req.Header.Set("Authorization", "Bearer "+r.Key)
	}
	client := r.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
			return "", fmt.Errorf("no answer within %s", timeout)
		}
		// The error names the URL; it carries no key.
		return "", err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		if ctx.Err() != nil {
			return "", fmt.Errorf("no answer within %s", timeout)
		}
		return "", fmt.Errorf("reading the answer: %w", err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return "", fmt.Errorf("endpoint answered %s: %s", resp.Status, excerpt(string(raw)))
	}
	var cr chatResponse
	if err := json.Unmarshal(raw, &cr); err != nil {
		return "", fmt.Errorf("answer is not a chat completion: %w", err)
	}
	if len(cr.Choices) == 0 || cr.Choices[0].Message.Content == nil {
		return "", errors.New("answer has no choices[0].message.content")
	}
	summary := oneLine(*cr.Choices[0].Message.Content)
	if summary == "" {
		return "", errors.New("answer is empty")
	}
	return summary, nil
}

func (r *Refiner) endpoint() string {
	u := strings.TrimRight(r.URL, "/")
	if strings.HasSuffix(u, "/chat/completions") {
		return u
	}
	return u + "/chat/completions"
}

// oneLine makes a model's answer a summary: its first non-empty line without the
// quoting or list marker models like to add, without control characters, bounded.
func oneLine(answer string) string {
	for _, line := range strings.Split(answer, "\n") {
		line = strings.TrimSpace(line)
		line = strings.TrimLeft(line, "-*#> ")
		line = strings.Trim(line, "`\"'“” ")
		line = strings.Map(func(r rune) rune {
			if unicode.IsControl(r) {
				return -1
			}
			return r
		}, line)
		if line = strings.Join(strings.Fields(line), " "); line != "" {
			return truncate(line, maxSummary)
		}
	}
	return ""
}
