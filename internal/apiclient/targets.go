package apiclient

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/mantis-deploy/mantis/internal/contract/api"
)

// TargetQuery selects the targets ListTargets returns.
type TargetQuery struct {
	// Selector keeps the targets whose labels hold every key=value of it, as a
	// deployment spec's target_selector; empty keeps every target.
	Selector map[string]string
	// Limit is the most targets returned, the first by name; 0 returns every one.
	Limit int
}

// targetPage is the page size ListTargets asks for: the API's largest.
const targetPage = 1000

// ListTargets returns the registered targets q selects, by name, reading the API's
// pages one after the other until it has Limit of them or the last page.
func (c *Client) ListTargets(ctx context.Context, q TargetQuery) ([]api.Target, error) {
	v := url.Values{}
	if len(q.Selector) > 0 {
		sel, err := SelectorParam(q.Selector)
		if err != nil {
			return nil, err
		}
		v.Set("selector", sel)
	}
	page := targetPage
	if q.Limit > 0 {
		page = min(q.Limit, targetPage)
	}
	v.Set("limit", strconv.Itoa(page))
	var out []api.Target
	for path := "/api/v1/targets?" + v.Encode(); path != ""; {
		var l api.TargetList
		if err := c.Do(ctx, http.MethodGet, path, nil, &l); err != nil {
			return nil, err
		}
		out = append(out, l.Targets...)
		if q.Limit > 0 && len(out) >= q.Limit {
			return out[:q.Limit], nil
		}
		next := strings.TrimPrefix(l.Next, c.BaseURL)
		if next == path {
			return nil, fmt.Errorf("reading %s: the next page's link names the same page", path)
		}
		path = next
	}
	return out, nil
}

// SelectorParam is sel as the API's ?selector= reads it: key=value pairs sorted by
// key and separated by commas. A key must not be empty, and neither a key nor a
// value may hold a comma (nor a key an equals sign).
func SelectorParam(sel map[string]string) (string, error) {
	pairs := make([]string, 0, len(sel))
	for _, k := range slices.Sorted(maps.Keys(sel)) {
		if k == "" || strings.ContainsAny(k, ",=") || strings.Contains(sel[k], ",") {
			return "", fmt.Errorf("selector %q=%q: a key is not empty and holds neither a comma nor =; a value holds no comma", k, sel[k])
		}
		pairs = append(pairs, k+"="+sel[k])
	}
	return strings.Join(pairs, ","), nil
}
