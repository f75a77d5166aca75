package schema_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/schema"
)

// additiveExceptions are the statements of released migrations that do not only add,
// by version, each with why the previous release keeps working across it. A new
// migration gets no entry: during a rolling upgrade the replicas still on the previous
// release run against the new schema (docs/operations/upgrading.md).
var additiveExceptions = map[int]map[string]string{
	4: {
		// Dropped and re-added at once, widened: the new CHECK accepts every status the
		// old one did, plus 'cancelled'.
		"ALTER TABLE PENDING_DISPATCH_REQUESTS DROP CONSTRAINT PENDING_DISPATCH_REQUESTS_STATUS_CHECK": "widened in the same migration",
	},
}

// breakingPatterns are statement shapes that remove or narrow what a previous release
// reads or writes, each with the reason a refusal gives.
var breakingPatterns = []struct {
	re     *regexp.Regexp
	reason string
}{
	{regexp.MustCompile(`\bDROP\b`), "drops a table, column, constraint, index or other object"},
	{regexp.MustCompile(`\bRENAME\b`), "renames what the previous release names"},
	{regexp.MustCompile(`\bALTER\s+COLUMN\b.*\b(TYPE|SET\s+NOT\s+NULL)\b`), "changes a column's type or makes it NOT NULL"},
	{regexp.MustCompile(`\bTRUNCATE\b`), "deletes every row of a table"},
}

// dollarBody matches a $$-quoted function body, whose statements are not DDL of the migration.
var dollarBody = regexp.MustCompile(`(?s)\$\$.*?\$\$`)

// migrationStatements returns sql's statements, comments and function bodies removed,
// upper-cased and with whitespace collapsed.
func migrationStatements(sql string) []string {
	var lines []string
	for _, line := range strings.Split(sql, "\n") {
		code, _, _ := strings.Cut(line, "--")
		lines = append(lines, code)
	}
	body := dollarBody.ReplaceAllString(strings.Join(lines, "\n"), "$$$$")
	var out []string
	for _, stmt := range strings.Split(body, ";") {
		if s := strings.Join(strings.Fields(strings.ToUpper(stmt)), " "); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// addedColumns returns the definitions of the columns stmt adds (ALTER TABLE ... ADD
// COLUMN a ..., ADD COLUMN b ...), each up to its clause's top-level comma.
func addedColumns(stmt string) []string {
	var defs []string
	parts := strings.Split(stmt, "ADD COLUMN ")
	for _, part := range parts[1:] {
		depth, end := 0, len(part)
	scan:
		for i, r := range part {
			switch {
			case r == '(':
				depth++
			case r == ')':
				depth--
			case r == ',' && depth == 0:
				end = i
				break scan
			}
		}
		defs = append(defs, strings.TrimSpace(part[:end]))
	}
	return defs
}

// nonAdditive returns why each statement of sql could break the previous release, and
// the statements the exceptions allow are left out.
func nonAdditive(sql string, allowed map[string]string) []string {
	var problems []string
	for _, stmt := range migrationStatements(sql) {
		if _, ok := allowed[stmt]; ok {
			continue
		}
		for _, p := range breakingPatterns {
			if p.re.MatchString(stmt) {
				problems = append(problems, fmt.Sprintf("%s: %s", p.reason, stmt))
			}
		}
		for _, def := range addedColumns(stmt) {
			if strings.Contains(def, "NOT NULL") && !strings.Contains(def, "DEFAULT") {
				problems = append(problems, fmt.Sprintf("adds a NOT NULL column without a default, which the previous release's INSERTs leave out: %s", def))
			}
		}
	}
	return problems
}

// TestMigrationsOnlyAdd holds the README's promise that a migration only adds (tables,
// nullable or defaulted columns, indexes), so that replicas on the previous release
// keep working during a rolling upgrade.
func TestMigrationsOnlyAdd(t *testing.T) {
	t.Parallel()
	all, err := schema.Migrations()
	require.NoError(t, err)
	require.NotEmpty(t, all)
	for _, m := range all {
		problems := nonAdditive(m.SQL, additiveExceptions[m.Version])
		require.Empty(t, problems, "migration %03d_%s does not only add", m.Version, m.Name)
	}
	for version, stmts := range additiveExceptions {
		for stmt := range stmts {
			found := false
			for _, m := range all {
				found = found || (m.Version == version && strings.Contains(strings.Join(migrationStatements(m.SQL), ";"), stmt))
			}
			require.True(t, found, "exception for migration %03d names a statement it does not hold: %s", version, stmt)
		}
	}
}

// TestMigrationsOnlyAddRefusesWhatBreaksThePreviousRelease feeds the check the
// statements it exists to refuse, and the additive ones it must let through.
func TestMigrationsOnlyAddRefusesWhatBreaksThePreviousRelease(t *testing.T) {
	t.Parallel()
	for _, sql := range []string{
		"ALTER TABLE deployments DROP COLUMN created_by;",
		"DROP TABLE analyses;",
		"ALTER TABLE command_queue ALTER COLUMN exit_code TYPE bigint;",
		"ALTER TABLE command_queue\n    ALTER COLUMN claimed_by SET NOT NULL;",
		"ALTER TABLE deployments RENAME COLUMN created_by TO author;",
		"ALTER TABLE deployments ADD COLUMN owner text CHECK (owner <> ''), ADD COLUMN team text NOT NULL;",
		"DROP INDEX command_queue_pending_idx;",
		"ALTER TABLE pending_dispatch_requests DROP CONSTRAINT pending_dispatch_requests_status_check;",
	} {
		require.NotEmpty(t, nonAdditive(sql, nil), "not refused: %s", sql)
	}
	require.Empty(t, nonAdditive(`
-- a comment that says DROP TABLE is not a statement
CREATE TABLE owners (id uuid PRIMARY KEY, name text NOT NULL);
ALTER TABLE deployments ADD COLUMN owner text CHECK (owner IN ('a', 'b')),
    ADD COLUMN retries integer NOT NULL DEFAULT 0;
CREATE INDEX deployments_owner_idx ON deployments (owner);
CREATE FUNCTION f() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM owners; -- inside a body, not DDL of the migration
    RETURN NULL;
END;
$$;
`, nil))
}
