// Command oracle computes what GKE, Kubeflow Trainer and kubectl compute from an object or a text,
// with their own Go code at the versions pinned in go.mod, for nicguard's differential tests
// (tests/differential).
//
// Long-lived: one JSON request per line on stdin, one JSON answer per line on stdout.
//
//	{"id":1,"op":"parse","annotation":"[...]"}
//	  -> gke-networking-api's ParseInterfaceAnnotation: {"id":1,"entries":[...]|null,"error":"..."}
//	{"id":2,"op":"effective","trainer":"v2.3"|"v2.1","runtime":{...},"trainjob":{...}}
//	  -> the runtime's and the TrainJob's wired templates and their pod-template annotations,
//	     after Trainer's own merge of runtimePatches (v2.3) or podTemplateOverrides (v2.1).
//	{"id":3,"op":"versions"} -> the modules this binary was built with.
//
// The YAML ops (snapshot, yaml2json, marshal) are in yaml.go; what a TrainJob's patches can
// carry (patchable) is in patchable.go. Objects given as JSON are decoded
// as Trainer's client decodes what the apiserver stored (case-sensitive field names, unknown
// fields dropped as the CRD's structural schema prunes them).
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"slices"
	"sort"

	gkenetv1 "github.com/GoogleCloudPlatform/gke-networking-api/apis/network/v1"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/kubeflow/trainer/v2/pkg/constants"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kjson "sigs.k8s.io/json"
)

const interfacesAnnotation = "networking.gke.io/interfaces"

type request struct {
	ID         json.RawMessage `json:"id"`
	Op         string          `json:"op"`
	Annotation *string         `json:"annotation"`
	Trainer    string          `json:"trainer"`
	Runtime    json.RawMessage `json:"runtime"`
	TrainJob   json.RawMessage `json:"trainjob"`
	YAML       *string         `json:"yaml"`
}

type entry struct {
	InterfaceName string  `json:"interfaceName"`
	Network       *string `json:"network"`
	Interface     *string `json:"interface"`
}

type parseAnswer struct {
	ID      json.RawMessage `json:"id"`
	Entries []entry         `json:"entries"`
	Error   string          `json:"error,omitempty"`
}

// wiredJob is one replicatedJob Trainer runs training ranks in, and its pod annotations.
type wiredJob struct {
	Name        string            `json:"name"`
	Index       int               `json:"index"`
	Reasons     []string          `json:"reasons"`
	Annotations map[string]string `json:"annotations"`
}

type effectiveAnswer struct {
	ID json.RawMessage `json:"id"`
	// Runtime: the runtime's own wired templates; Effective: the TrainJob's, after its patches.
	Runtime   []wiredJob `json:"runtime"`
	Effective []wiredJob `json:"effective"`
	// Jobs: every replicatedJob name after the patches, in Trainer's order.
	Jobs []string `json:"jobs"`
	// Removed: wired runtime jobs the patches delete; Unwired: wired jobs whose interfaces
	// annotation the patches remove.
	Removed []string `json:"removed"`
	Unwired []string `json:"unwired"`
	// Annotated: every other replicatedJob after the patches whose pod annotations carry the
	// interfaces annotation (JobSet runs its pods too).
	Annotated []wiredJob `json:"annotated"`
	Error     string     `json:"error,omitempty"`
}

type errorAnswer struct {
	ID    json.RawMessage `json:"id"`
	Error string          `json:"error"`
}

// podTemplateOverride mirrors Trainer v2.1.0's PodTemplateOverride
// (pkg/apis/trainer/v1alpha1/trainjob_types.go @v2.1.0): that version's module path is the same
// as v2.3.0's, so both cannot be required at once; its types are reproduced field for field.
type podTemplateOverride struct {
	TargetJobs []struct {
		Name string `json:"name,omitempty"`
	} `json:"targetJobs,omitempty"`
	Metadata *metav1.ObjectMeta       `json:"metadata,omitempty"`
	Spec     *podTemplateSpecOverride `json:"spec,omitempty"`
}

type podTemplateSpecOverride struct {
	ServiceAccountName *string                       `json:"serviceAccountName,omitempty"`
	NodeSelector       map[string]string             `json:"nodeSelector,omitempty"`
	Affinity           *corev1.Affinity              `json:"affinity,omitempty"`
	Tolerations        []corev1.Toleration           `json:"tolerations,omitempty"`
	Volumes            []corev1.Volume               `json:"volumes,omitempty"`
	InitContainers     []containerOverride           `json:"initContainers,omitempty"`
	Containers         []containerOverride           `json:"containers,omitempty"`
	SchedulingGates    []corev1.PodSchedulingGate    `json:"schedulingGates,omitempty"`
	ImagePullSecrets   []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`
}

type containerOverride struct {
	Name         string               `json:"name,omitempty"`
	Env          []corev1.EnvVar      `json:"env,omitempty"`
	VolumeMounts []corev1.VolumeMount `json:"volumeMounts,omitempty"`
}

type runtimeObject struct {
	Spec trainer.TrainingRuntimeSpec `json:"spec"`
}

type trainJobV21 struct {
	Spec struct {
		PodTemplateOverrides []podTemplateOverride `json:"podTemplateOverrides,omitempty"`
	} `json:"spec"`
}

func main() {
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	out := bufio.NewWriterSize(os.Stdout, 1<<16)
	encoder := json.NewEncoder(out)
	encoder.SetEscapeHTML(false)
	for {
		line, err := in.ReadBytes('\n')
		if len(line) > 0 {
			if encodeErr := encoder.Encode(answer(line)); encodeErr != nil {
				fmt.Fprintln(os.Stderr, "oracle:", encodeErr)
				os.Exit(1)
			}
			if flushErr := out.Flush(); flushErr != nil {
				os.Exit(1)
			}
		}
		if err == io.EOF {
			return
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "oracle:", err)
			os.Exit(1)
		}
	}
}

func answer(line []byte) any {
	var req request
	if err := json.Unmarshal(line, &req); err != nil {
		return errorAnswer{Error: "bad request: " + err.Error()}
	}
	switch req.Op {
	case "parse":
		if req.Annotation == nil {
			return errorAnswer{ID: req.ID, Error: "parse needs annotation"}
		}
		return parse(req.ID, *req.Annotation)
	case "effective":
		return effective(req)
	case "snapshot", "yaml2json":
		if req.YAML == nil {
			return errorAnswer{ID: req.ID, Error: req.Op + " needs yaml"}
		}
		if req.Op == "snapshot" {
			return snapshot(req.ID, *req.YAML)
		}
		return yamlToJSON(req.ID, *req.YAML)
	case "marshal":
		return marshal(req.ID, req.Runtime)
	case "patchable":
		return patchable(req.ID)
	case "versions":
		return versions(req.ID)
	}
	return errorAnswer{ID: req.ID, Error: "unknown op " + req.Op}
}

// parse is GKE's reading of the interfaces annotation, errors and partial results included.
func parse(id json.RawMessage, annotation string) parseAnswer {
	parsed, err := gkenetv1.ParseInterfaceAnnotation(annotation)
	found := parseAnswer{ID: id}
	if parsed != nil {
		found.Entries = make([]entry, 0, len(parsed))
		for _, ref := range parsed {
			found.Entries = append(found.Entries, entry{ref.InterfaceName, ref.Network, ref.Interface})
		}
	}
	if err != nil {
		found.Error = err.Error()
	}
	return found
}

func effective(req request) effectiveAnswer {
	found := effectiveAnswer{ID: req.ID}
	var rt runtimeObject
	if err := kjson.UnmarshalCaseSensitivePreserveInts(req.Runtime, &rt); err != nil {
		found.Error = "runtime: " + err.Error()
		return found
	}
	launcherAsNode := rt.Spec.MLPolicy != nil && rt.Spec.MLPolicy.MPI != nil &&
		rt.Spec.MLPolicy.MPI.RunLauncherAsNode != nil && *rt.Spec.MLPolicy.MPI.RunLauncherAsNode
	template := rt.Spec.Template
	found.Runtime = wiredJobs(template.Spec, launcherAsNode)
	var err error
	switch req.Trainer {
	case "v2.3", "":
		var job trainer.TrainJob
		if err = kjson.UnmarshalCaseSensitivePreserveInts(req.TrainJob, &job); err == nil {
			err = mergeRuntimePatches(&job, &template)
		}
	case "v2.1":
		var job trainJobV21
		if err = kjson.UnmarshalCaseSensitivePreserveInts(req.TrainJob, &job); err == nil {
			err = mergePodTemplateOverrides(job.Spec.PodTemplateOverrides, &template)
		}
	default:
		err = fmt.Errorf("unknown trainer version %q", req.Trainer)
	}
	if err != nil {
		found.Error = "trainjob: " + err.Error()
		return found
	}
	found.Effective = wiredJobs(template.Spec, launcherAsNode)
	found.Jobs = []string{}
	found.Annotated = []wiredJob{}
	for i, job := range template.Spec.ReplicatedJobs {
		found.Jobs = append(found.Jobs, job.Name)
		annotations := job.Template.Spec.Template.Annotations
		_, carries := annotations[interfacesAnnotation]
		wired := slices.ContainsFunc(found.Effective, func(w wiredJob) bool { return w.Index == i })
		if carries && !wired {
			found.Annotated = append(found.Annotated, wiredJob{job.Name, i, []string{"annotation"}, annotations})
		}
	}
	found.Removed, found.Unwired = []string{}, []string{}
	for _, before := range found.Runtime {
		if !slices.Contains(found.Jobs, before.Name) {
			found.Removed = append(found.Removed, before.Name)
			continue
		}
		if _, had := before.Annotations[interfacesAnnotation]; !had {
			continue
		}
		after := slices.IndexFunc(found.Effective, func(w wiredJob) bool { return w.Name == before.Name })
		if after < 0 {
			found.Unwired = append(found.Unwired, before.Name)
		} else if _, has := found.Effective[after].Annotations[interfacesAnnotation]; !has {
			found.Unwired = append(found.Unwired, before.Name)
		}
	}
	return found
}

// wiredJobs: the replicatedJobs whose pods run training ranks, in list order: the trainer
// ancestor by label (how Trainer's newRuntimeInfo picks it), `node` by name (the torch and MPI
// plugins' constants.Node), and `launcher` when the MPI policy runs the launcher as a node.
func wiredJobs(spec jobsetv1alpha2.JobSetSpec, launcherAsNode bool) []wiredJob {
	found := []wiredJob{}
	for i, job := range spec.ReplicatedJobs {
		var reasons []string
		if job.Name == constants.Node {
			reasons = append(reasons, "name")
		}
		if job.Template.Labels[constants.LabelTrainJobAncestor] == constants.AncestorTrainer {
			reasons = append(reasons, "ancestor-label")
		}
		if launcherAsNode && job.Name == constants.Launcher {
			reasons = append(reasons, "launcher-as-node")
		}
		if len(reasons) > 0 {
			found = append(found, wiredJob{job.Name, i, reasons, job.Template.Spec.Template.Annotations})
		}
	}
	return found
}

// mergeRuntimePatches is TrainingRuntime.mergeRuntimePatches of Trainer v2.3.0
// (pkg/runtime/core/trainingruntime.go): each patch's template.spec strategic-merge-patched
// over the JobSetSpec in list order, then the runtime's replicatedJob order restored.
func mergeRuntimePatches(trainJob *trainer.TrainJob, jobSetTemplateSpec *trainer.JobSetTemplateSpec) error {
	order := make(map[string]int, len(jobSetTemplateSpec.Spec.ReplicatedJobs))
	for i, rJob := range jobSetTemplateSpec.Spec.ReplicatedJobs {
		order[rJob.Name] = i
	}
	for _, runtimePatch := range trainJob.Spec.RuntimePatches {
		if runtimePatch.TrainingRuntimeSpec == nil ||
			runtimePatch.TrainingRuntimeSpec.Template == nil ||
			runtimePatch.TrainingRuntimeSpec.Template.Spec == nil {
			continue
		}
		source, err := json.Marshal(jobSetTemplateSpec.Spec)
		if err != nil {
			return err
		}
		patch, err := json.Marshal(runtimePatch.TrainingRuntimeSpec.Template.Spec)
		if err != nil {
			return err
		}
		merged, err := strategicpatch.StrategicMergePatch(source, patch, jobsetv1alpha2.JobSetSpec{})
		if err != nil {
			return err
		}
		mergedSpec := jobsetv1alpha2.JobSetSpec{}
		if err := json.Unmarshal(merged, &mergedSpec); err != nil {
			return err
		}
		jobSetTemplateSpec.Spec = mergedSpec
	}
	sort.SliceStable(jobSetTemplateSpec.Spec.ReplicatedJobs, func(i, j int) bool {
		return order[jobSetTemplateSpec.Spec.ReplicatedJobs[i].Name] <
			order[jobSetTemplateSpec.Spec.ReplicatedJobs[j].Name]
	})
	return nil
}

// mergePodTemplateOverrides is TrainingRuntime.mergePodTemplateOverrides of Trainer v2.1.0
// (pkg/runtime/core/trainingruntime.go @v2.1.0): for each override in order, each targeted job's
// PodTemplateSpec strategic-merge-patched with {metadata: {labels, annotations}, spec}.
func mergePodTemplateOverrides(overrides []podTemplateOverride, jobSetTemplateSpec *trainer.JobSetTemplateSpec) error {
	for _, podTemplateOverride := range overrides {
		for i, job := range jobSetTemplateSpec.Spec.ReplicatedJobs {
			targeted := false
			for _, target := range podTemplateOverride.TargetJobs {
				targeted = targeted || target.Name == job.Name
			}
			if !targeted {
				continue
			}
			podTemplatePatch := map[string]any{}
			if podTemplateOverride.Metadata != nil {
				metadata := map[string]any{}
				if podTemplateOverride.Metadata.Labels != nil {
					metadata["labels"] = podTemplateOverride.Metadata.Labels
				}
				if podTemplateOverride.Metadata.Annotations != nil {
					metadata["annotations"] = podTemplateOverride.Metadata.Annotations
				}
				if len(metadata) > 0 {
					podTemplatePatch["metadata"] = metadata
				}
			}
			if podTemplateOverride.Spec != nil {
				podTemplatePatch["spec"] = podTemplateOverride.Spec
			}
			source, err := json.Marshal(job.Template.Spec.Template)
			if err != nil {
				return err
			}
			patch, err := json.Marshal(podTemplatePatch)
			if err != nil {
				return err
			}
			merged, err := strategicpatch.StrategicMergePatch(source, patch, corev1.PodTemplateSpec{})
			if err != nil {
				return err
			}
			mergedTemplate := corev1.PodTemplateSpec{}
			if err := json.Unmarshal(merged, &mergedTemplate); err != nil {
				return err
			}
			jobSetTemplateSpec.Spec.ReplicatedJobs[i].Template.Spec.Template = mergedTemplate
		}
	}
	return nil
}

func versions(id json.RawMessage) any {
	found := map[string]any{"id": id}
	if info, ok := debug.ReadBuildInfo(); ok {
		found["go"] = info.GoVersion
		modules := map[string]string{}
		for _, dep := range info.Deps {
			modules[dep.Path] = dep.Version
		}
		found["modules"] = modules
	}
	return found
}
