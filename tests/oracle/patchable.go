// What a TrainJob can carry, read by reflection from Trainer v2.3.0's own types.
//
//	{"id":7,"op":"patchable"}
//	  -> {"podSpec":[...],"container":[...],"initContainer":[...],"podClaims":[...],"containerClaims":[...]}
//
// podSpec, container and initContainer: the JSON fields of the pod-spec patch a runtimePatch
// reaches (found by following runtimePatches[].trainingRuntimeSpec.template.spec.replicatedJobs[]
// .template.spec.template.spec through the types, so a restructured path fails as loudly as a new
// field). podClaims and containerClaims: every JSON path under TrainJob.spec whose type is a pod's
// claim (corev1.PodResourceClaim) or a container's reference to one (corev1.ResourceClaim).
package main

import (
	"encoding/json"
	"reflect"
	"sort"
	"strings"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
)

// podSpecPatchPath: the JSON names from a RuntimePatch down to the pod spec it patches.
var podSpecPatchPath = []string{
	"trainingRuntimeSpec", "template", "spec", "replicatedJobs", "template", "spec", "template", "spec",
}

type patchableAnswer struct {
	ID              json.RawMessage `json:"id"`
	PodSpec         []string        `json:"podSpec"`
	Container       []string        `json:"container"`
	InitContainer   []string        `json:"initContainer"`
	PodClaims       []string        `json:"podClaims"`
	ContainerClaims []string        `json:"containerClaims"`
	Error           string          `json:"error,omitempty"`
}

func patchable(id json.RawMessage) patchableAnswer {
	found := patchableAnswer{ID: id, PodClaims: []string{}, ContainerClaims: []string{}}
	podSpec := reflect.TypeOf(trainer.RuntimePatch{})
	for _, name := range podSpecPatchPath {
		field, ok := jsonField(podSpec, name)
		if !ok {
			found.Error = "no field " + name + " in " + podSpec.String()
			return found
		}
		podSpec = element(field.Type)
	}
	found.PodSpec = jsonNames(podSpec)
	for _, list := range []struct {
		name string
		into *[]string
	}{{"containers", &found.Container}, {"initContainers", &found.InitContainer}} {
		field, ok := jsonField(podSpec, list.name)
		if !ok {
			*list.into = []string{}
			continue
		}
		*list.into = jsonNames(element(field.Type))
	}
	walk(reflect.TypeOf(trainer.TrainJobSpec{}), "spec", map[reflect.Type]bool{}, &found)
	sort.Strings(found.PodClaims)
	sort.Strings(found.ContainerClaims)
	return found
}

var (
	podClaimType       = reflect.TypeOf(corev1.PodResourceClaim{})
	containerClaimType = reflect.TypeOf(corev1.ResourceClaim{})
)

// walk records every path below t whose type is a claim; a type on the current path is not
// entered again (recursive types), so the walk ends.
func walk(t reflect.Type, path string, entered map[reflect.Type]bool, found *patchableAnswer) {
	t = element(t)
	switch t {
	case podClaimType:
		found.PodClaims = append(found.PodClaims, path)
		return
	case containerClaimType:
		found.ContainerClaims = append(found.ContainerClaims, path)
		return
	}
	if t.Kind() != reflect.Struct || entered[t] {
		return
	}
	entered[t] = true
	defer delete(entered, t)
	for _, field := range fields(t) {
		walk(field.Type, path+"."+field.name, entered, found)
	}
}

type namedField struct {
	name string
	reflect.StructField
}

// fields: a struct's JSON fields as encoding/json sees them, inlined embedded structs included.
func fields(t reflect.Type) []namedField {
	var found []namedField
	for i := range t.NumField() {
		field := t.Field(i)
		name, _, _ := strings.Cut(field.Tag.Get("json"), ",")
		if name == "-" || !field.IsExported() {
			continue
		}
		if name == "" && field.Anonymous && element(field.Type).Kind() == reflect.Struct {
			found = append(found, fields(element(field.Type))...)
			continue
		}
		if name == "" {
			name = field.Name
		}
		found = append(found, namedField{name, field})
	}
	return found
}

func jsonField(t reflect.Type, name string) (namedField, bool) {
	for _, field := range fields(t) {
		if field.name == name {
			return field, true
		}
	}
	return namedField{}, false
}

func jsonNames(t reflect.Type) []string {
	names := []string{}
	for _, field := range fields(t) {
		names = append(names, field.name)
	}
	sort.Strings(names)
	return names
}

// element: the type a pointer, slice, array or map holds, repeatedly.
func element(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array ||
		t.Kind() == reflect.Map {
		t = t.Elem()
	}
	return t
}
