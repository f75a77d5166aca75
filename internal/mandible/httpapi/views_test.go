package httpapi

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/schema"
)

// fill sets every field of v, recursively, to a value that is not zero, so that a
// field the conversion forgets shows in the JSON.
func fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem())
	case reflect.Struct:
		if v.Type() == reflect.TypeOf(time.Time{}) {
			v.Set(reflect.ValueOf(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i))
			}
		}
	case reflect.Slice:
		if v.Type() == reflect.TypeOf(json.RawMessage{}) {
			v.SetBytes([]byte(`{"name":"x"}`))
			return
		}
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0))
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k)
		fill(e)
		v.SetMapIndex(k, e)
	case reflect.Array:
		for i := range v.Len() {
			v.Index(i).Set(reflect.ValueOf(uint8(i + 1)).Convert(v.Type().Elem()))
		}
	case reflect.String:
		v.SetString("x")
	case reflect.Int, reflect.Int32, reflect.Int64:
		v.SetInt(3)
	case reflect.Bool:
		v.SetBool(true)
	}
}

func filled[T any]() T {
	var v T
	fill(reflect.ValueOf(&v).Elem())
	return v
}

// The enqueue answer carries every field of the stored request, in snake_case
// (it once wrote the schema view's Go field names).
func TestEnqueueAnswerCarriesTheStoredRequest(t *testing.T) {
	t.Parallel()
	e := filled[schema.EnqueuedRequest]()
	got, err := json.Marshal(enqueueAnswerOf([]schema.EnqueuedRequest{e}))
	require.NoError(t, err)
	require.JSONEq(t, `{"requests":[{"id":"`+e.ID.String()+`","idempotency_key":"x","created":true,"expires_at":"2025-01-02T03:04:05Z"}]}`, string(got))
}
