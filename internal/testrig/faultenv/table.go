package faultenv

import (
	"fmt"
	"strings"
	"time"
)

// TableHeader is the fault table's columns.
var TableHeader = []string{"scenario", "fault", "deployments", "expected status met", "lost", "run twice", "stuck", "time to recover"}

// Row is the result as table cells.
func (r Result) Row() []string {
	met := "yes"
	if !r.ExpectedMet {
		met = "no"
	}
	rec := "none"
	if r.Recover >= 0 {
		rec = r.Recover.Round(100 * time.Millisecond).String()
	}
	return []string{r.Scenario, r.Fault, fmt.Sprint(r.Deployments), met, fmt.Sprint(r.Lost), fmt.Sprint(r.RunTwice), fmt.Sprint(r.Stuck), rec}
}

// Table renders results as one Markdown table.
func Table(results []Result) string {
	rows := [][]string{TableHeader}
	for _, r := range results {
		rows = append(rows, r.Row())
	}
	var b strings.Builder
	for i, row := range rows {
		b.WriteString("| " + strings.Join(row, " | ") + " |\n")
		if i == 0 {
			b.WriteString("|" + strings.Repeat("---|", len(row)) + "\n")
		}
	}
	return b.String()
}
