// YAML as Trainer and kubectl read it, with their own code at the versions pinned in go.mod.
//
//	{"id":4,"op":"snapshot","yaml":"..."}
//	  -> Trainer v2.3.0's getRuntimeSnapshot decoding of a snapshot's data.runtime
//	     (sigs.k8s.io/yaml.Unmarshal into the typed runtime) and what nicguard must agree with:
//	     each replicatedJob's labels, pod annotations and DRA claims (pod and containers').
//	{"id":5,"op":"yaml2json","yaml":"..."}
//	  -> the JSON documents kubectl sends for a file (cli-runtime's StreamVisitor).
//	{"id":6,"op":"marshal","runtime":{...}}
//	  -> the text Trainer's createRuntimeSnapshot writes for a runtime (sigs.k8s.io/yaml.Marshal).
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kjson "sigs.k8s.io/json"
	sigsyaml "sigs.k8s.io/yaml"
)

// snapshotJob is one replicatedJob of the decoded copy: its Job-template labels, its
// pod-template annotations, and the DRA claims of its pod template (spec.resourceClaims, and each
// container's and init container's resources.claims, in list order).
type snapshotJob struct {
	Name                string                    `json:"name"`
	Labels              map[string]string         `json:"labels"`
	Annotations         map[string]string         `json:"annotations"`
	ResourceClaims      []corev1.PodResourceClaim `json:"resourceClaims"`
	ContainerClaims     [][]corev1.ResourceClaim  `json:"containerClaims"`
	InitContainerClaims [][]corev1.ResourceClaim  `json:"initContainerClaims"`
}

func jobOfSnapshot(job jobsetv1alpha2.ReplicatedJob) snapshotJob {
	pod := job.Template.Spec.Template
	found := snapshotJob{
		Name: job.Name, Labels: job.Template.Labels, Annotations: pod.Annotations,
		ResourceClaims:      pod.Spec.ResourceClaims,
		ContainerClaims:     [][]corev1.ResourceClaim{},
		InitContainerClaims: [][]corev1.ResourceClaim{},
	}
	for _, container := range pod.Spec.Containers {
		found.ContainerClaims = append(found.ContainerClaims, container.Resources.Claims)
	}
	for _, container := range pod.Spec.InitContainers {
		found.InitContainerClaims = append(found.InitContainerClaims, container.Resources.Claims)
	}
	return found
}

type snapshotAnswer struct {
	ID         json.RawMessage   `json:"id"`
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Name       string            `json:"name"`
	Namespace  string            `json:"namespace"`
	Labels     map[string]string `json:"labels"`
	// RunLauncherAsNode: spec.mlPolicy.mpi.runLauncherAsNode as decoded (null: unset).
	RunLauncherAsNode *bool `json:"runLauncherAsNode"`
	// Wired: the jobs Trainer runs training ranks in, as the effective op reports a runtime's.
	Wired []wiredJob    `json:"wired"`
	Jobs  []snapshotJob `json:"jobs"`
	// Runtime: the whole decoded copy, as Go encodes the typed object.
	Runtime json.RawMessage `json:"runtime"`
	Error   string          `json:"error,omitempty"`
}

type documentsAnswer struct {
	ID json.RawMessage `json:"id"`
	// Documents: those kubectl sends, in order (on an error, those before it).
	Documents []json.RawMessage `json:"documents"`
	Error     string            `json:"error,omitempty"`
}

type marshalAnswer struct {
	ID    json.RawMessage `json:"id"`
	YAML  string          `json:"yaml"`
	Error string          `json:"error,omitempty"`
}

// snapshot decodes as getRuntimeSnapshot (pkg/runtime/core/snapshot.go @v2.3.0) does. Trainer
// picks the target type by the TrainJob's spec.runtimeRef (RuntimeRefToRuntimeRegistryKey selects
// ClusterTrainingRuntime.NewObjects or TrainingRuntime.NewObjects, each decoding into its own
// type); both types have the same fields, so the copy is decoded into each, and a difference
// between the two readings is reported as an error of the oracle itself. What getRuntimeSnapshot
// checks after decoding (name, group and kind against runtimeRef; v2.3.0's own copies, without
// apiVersion and kind, fail it: kubeflow/trainer#3921) is left to the caller.
func snapshot(id json.RawMessage, text string) snapshotAnswer {
	found := snapshotAnswer{ID: id}
	var cluster trainer.ClusterTrainingRuntime
	if err := sigsyaml.Unmarshal([]byte(text), &cluster); err != nil {
		found.Error = err.Error()
		return found
	}
	var namespaced trainer.TrainingRuntime
	if err := sigsyaml.Unmarshal([]byte(text), &namespaced); err != nil {
		found.Error = "oracle: TrainingRuntime fails where ClusterTrainingRuntime decodes: " + err.Error()
		return found
	}
	encoded, err := json.Marshal(cluster)
	if err != nil {
		found.Error = "oracle: " + err.Error()
		return found
	}
	if again, _ := json.Marshal(namespaced); !bytes.Equal(encoded, again) {
		found.Error = "oracle: ClusterTrainingRuntime and TrainingRuntime decode differently"
		return found
	}
	found.Runtime = encoded
	found.APIVersion, found.Kind = cluster.APIVersion, cluster.Kind
	found.Name, found.Namespace, found.Labels = cluster.Name, cluster.Namespace, cluster.Labels
	spec := cluster.Spec
	if spec.MLPolicy != nil && spec.MLPolicy.MPI != nil {
		found.RunLauncherAsNode = spec.MLPolicy.MPI.RunLauncherAsNode
	}
	launcherAsNode := found.RunLauncherAsNode != nil && *found.RunLauncherAsNode
	found.Wired = wiredJobs(spec.Template.Spec, launcherAsNode)
	found.Jobs = []snapshotJob{}
	for _, job := range spec.Template.Spec.ReplicatedJobs {
		found.Jobs = append(found.Jobs, jobOfSnapshot(job))
	}
	return found
}

// yamlToJSON is cli-runtime's StreamVisitor.Visit (pkg/resource/visitor.go @v0.36.2, the
// release of apimachinery Trainer v2.3.0 pins): NewYAMLOrJSONDecoder with a 4096-byte sniff,
// each document decoded into a RawExtension, trimmed, empty and `null` documents skipped. Each
// is then read as kubectl's unstructured decoder reads values (util/json, which
// UnstructuredJSONScheme uses: integers int64, other numbers float64) and encoded again: the
// values kubectl sends. On an error, the documents before it are kept: kubectl apply has sent
// them by then. (kubectl also refuses a document that is not an object with a kind; readers are
// compared on the values, and what nicguard does with such a document is its own rule.)
func yamlToJSON(id json.RawMessage, text string) documentsAnswer {
	found := documentsAnswer{ID: id, Documents: []json.RawMessage{}}
	decoder := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(text), 4096)
	for {
		ext := runtime.RawExtension{}
		if err := decoder.Decode(&ext); err != nil {
			if !errors.Is(err, io.EOF) {
				found.Error = err.Error()
			}
			return found
		}
		raw := bytes.TrimSpace(ext.Raw)
		if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
			continue
		}
		var value any
		if err := utiljson.Unmarshal(raw, &value); err != nil {
			found.Error = "unstructured: " + err.Error()
			return found
		}
		sent, err := json.Marshal(value)
		if err != nil {
			found.Error = "unstructured: " + err.Error()
			return found
		}
		found.Documents = append(found.Documents, sent)
	}
}

// marshal is createRuntimeSnapshot's serialization (sigs.k8s.io/yaml.Marshal of the typed
// runtime) of a runtime given as JSON (decoded as the apiserver stored it: case-sensitive).
func marshal(id json.RawMessage, object json.RawMessage) marshalAnswer {
	found := marshalAnswer{ID: id}
	var cluster trainer.ClusterTrainingRuntime
	if err := kjson.UnmarshalCaseSensitivePreserveInts(object, &cluster); err != nil {
		found.Error = err.Error()
		return found
	}
	text, err := sigsyaml.Marshal(&cluster)
	if err != nil {
		found.Error = err.Error()
		return found
	}
	found.YAML = string(text)
	return found
}
