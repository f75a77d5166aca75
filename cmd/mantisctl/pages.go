package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/mantis-deploy/mantis/internal/apiclient"
)

// followPages reads the list at path page after page, following each page's next
// link until there is none, and hands each page's items to each.
func followPages[P, T any](ctx context.Context, c *apiclient.Client, path string, items func(P) ([]T, string), each func([]T) error) error {
	for path != "" {
		var page P
		if err := c.Do(ctx, http.MethodGet, path, nil, &page); err != nil {
			return err
		}
		ts, next := items(page)
		if err := each(ts); err != nil {
			return err
		}
		next = strings.TrimPrefix(next, c.BaseURL)
		if next == path {
			return fmt.Errorf("reading %s: the next page's link names the same page", path)
		}
		path = next
	}
	return nil
}

// collectOrStream is the each of followPages for a list command: JSON lines are
// printed page by page as they arrive; every other format collects the items into
// *all to print once at the end.
func collectOrStream[T any](f *clientFlags, out io.Writer, all *[]T) func([]T) error {
	return func(ts []T) error {
		if f.format == outputJSONL {
			return printData(out, f.format, ts)
		}
		*all = append(*all, ts...)
		return nil
	}
}
