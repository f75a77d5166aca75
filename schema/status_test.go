package schema_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
	"github.com/mantis-deploy/mantis/schema"
)

// enumColumn is a column whose CHECK constraint lists the values Go names in a list.
type enumColumn struct {
	table, column string
	values        []string
}

// enumColumns are the columns whose values Go code names as constants.
var enumColumns = []enumColumn{
	{"pending_dispatch_requests", "status", domain.DispatchStatuses},
	{"deployments", "status", domain.DeploymentStatuses},
	{"deployment_steps", "status", domain.StepStatuses},
	{"command_queue", "status", domain.CommandStatuses},
	{"thorax_instances", "status", domain.InstanceStatuses},
	{"analyses", "status", domain.AnalysisStatuses},
	{"analyses", "source", schema.AnalysisSources},
	{"deployments", "priority", domain.Priorities},
	{"pending_dispatch_requests", "priority", domain.Priorities},
	{"command_queue", "priority", domain.Priorities},
	{"targets", "mode", schema.Modes},
	{"command_queue", "mode", schema.Modes},
	{"concurrency_limits", "scope", domain.LimitScopes},
	{"deployment_decisions", "decision", domain.DecisionNames},
}

// checkListValue matches one quoted value of a CHECK list as pg_get_constraintdef
// prints it: 'value'::text.
var checkListValue = regexp.MustCompile(`'((?:[^']|'')*)'`)

// checkList is the list of values of the one CHECK constraint on table.column that
// lists them, as pg_get_constraintdef prints it (col = ANY (ARRAY['a'::text, ...]))
// or as written (col IN ('a', ...)).
func checkList(t *testing.T, table, column, def string) []string {
	t.Helper()
	start := strings.Index(def, "ARRAY[")
	end := strings.LastIndex(def, "]")
	if start < 0 {
		start = strings.Index(def, "IN (")
		end = strings.LastIndex(def, ")")
	}
	require.True(t, start >= 0 && end > start, "%s.%s: CHECK %q lists no values", table, column, def)
	var out []string
	for _, m := range checkListValue.FindAllStringSubmatch(def[start:end], -1) {
		out = append(out, strings.ReplaceAll(m[1], "''", "'"))
	}
	return out
}

// The states, priorities, modes, sources, limit scopes and decisions Go names are
// exactly those the migrations' CHECK constraints allow: a value added or removed on
// one side only fails here, before a write of it fails in production.
func TestStatusConstantsMatchCheckConstraints(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := testenv.MigratedPool(t)
	for _, c := range enumColumns {
		var defs []string
		rows, err := pool.Query(ctx, `
			SELECT pg_get_constraintdef(k.oid)
			FROM pg_constraint k
			JOIN pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = ANY (k.conkey)
			WHERE k.contype = 'c' AND k.conrelid = $1::regclass AND a.attname = $2
			  AND cardinality(k.conkey) = 1`, c.table, c.column)
		require.NoError(t, err)
		for rows.Next() {
			var def string
			require.NoError(t, rows.Scan(&def))
			defs = append(defs, def)
		}
		require.NoError(t, rows.Err())
		require.Len(t, defs, 1, "%s.%s: want one CHECK constraint on the column, got %q", c.table, c.column, defs)
		require.ElementsMatch(t, checkList(t, c.table, c.column, defs[0]), c.values,
			"%s.%s: the CHECK constraint (left) and the Go list (right) differ", c.table, c.column)
	}
}

// TestCheckListReadsBothForms shows checkList reads both forms a CHECK list takes.
func TestCheckListReadsBothForms(t *testing.T) {
	t.Parallel()
	require.Equal(t, []string{"live", "dead"},
		checkList(t, "t", "c", `CHECK ((status = ANY (ARRAY['live'::text, 'dead'::text])))`))
	require.Equal(t, []string{"a", "it's"}, checkList(t, "t", "c", `CHECK (mode IN ('a', 'it''s'))`))
}

// listedConstants are the lists of values, each following the const block it lists.
var listedConstants = []string{
	"DispatchStatuses", "DeploymentStatuses", "StepStatuses", "CommandStatuses", "InstanceStatuses",
	"AnalysisStatuses", "AnalysisSources", "Modes", "Priorities", "LimitScopes", "DecisionNames",
}

// Every constant of a block of states is in the list that follows the block, so that
// a state added as a constant but not to its list fails the CHECK comparison above
// instead of passing unseen.
func TestStatusListsNameEveryConstant(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	shared, err := filepath.Glob("../internal/domain/*.go")
	require.NoError(t, err)
	files = append(files, shared...)
	found := map[string]bool{}
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
		require.NoError(t, err)
		for _, list := range listedConstants {
			block, listed, ok := constantsAndList(t, f, list)
			if !ok {
				continue
			}
			found[list] = true
			require.NotEmpty(t, block, "%s: no constant block before %s", file, list)
			require.ElementsMatch(t, block, listed, "%s: the constants (left) and %s (right) differ", file, list)
		}
	}
	for _, list := range listedConstants {
		require.True(t, found[list], "no file of package schema or domain declares %s", list)
	}
}

// constantsAndList returns the names of the constants declared in the const block
// that comes last before var list in f, and the names list holds; ok is false when f
// does not declare list.
func constantsAndList(t *testing.T, f *ast.File, list string) (block, listed []string, ok bool) {
	t.Helper()
	for _, decl := range f.Decls {
		gen, isGen := decl.(*ast.GenDecl)
		if !isGen {
			continue
		}
		if gen.Tok == token.CONST {
			block = constNames(gen)
			continue
		}
		for _, spec := range gen.Specs {
			vs, isValue := spec.(*ast.ValueSpec)
			if !isValue || len(vs.Names) != 1 || vs.Names[0].Name != list {
				continue
			}
			lit, isLit := vs.Values[0].(*ast.CompositeLit)
			require.True(t, isLit, "%s is not a list literal", list)
			for _, e := range lit.Elts {
				id, isIdent := e.(*ast.Ident)
				require.True(t, isIdent, "%s holds %T, not a constant's name", list, e)
				listed = append(listed, id.Name)
			}
			return block, listed, true
		}
	}
	return nil, nil, false
}

// constNames are the names a const block declares with a string value.
func constNames(gen *ast.GenDecl) []string {
	var out []string
	for _, spec := range gen.Specs {
		vs := spec.(*ast.ValueSpec)
		for i, n := range vs.Names {
			if i < len(vs.Values) {
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					if _, err := strconv.Unquote(lit.Value); err == nil {
						out = append(out, n.Name)
					}
				}
			}
		}
	}
	return out
}
