{{/*
Labels of every object: those manifests/ sets (part-of, version) plus Helm's own.
*/}}
{{- define "nicguard.labels" -}}
app.kubernetes.io/part-of: nicguard
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{/*
The pods' identity: the Deployment selector, the Service, the PDB and the spread constraints.
Fixed on purpose: a Deployment's selector cannot change after install.
*/}}
{{- define "nicguard.selector" -}}
app.kubernetes.io/name: nicguard
app.kubernetes.io/component: webhook
{{- end }}

{{- define "nicguard.serviceName" -}}
{{- .Values.settings.serviceName -}}
{{- end }}

{{- define "nicguard.webhookConfiguration" -}}
{{- .Values.settings.webhookConfiguration | default "nicguard" -}}
{{- end }}

{{/*
namespace/name settings whose nicguard default lives in nicguard-system: "" means the object of
that name in the release namespace. Called with (list $ value defaultName).
*/}}
{{- define "nicguard.ref" -}}
{{- $root := index . 0 -}}
{{- index . 1 | default (printf "%s/%s" $root.Release.Namespace (index . 2)) -}}
{{- end }}

{{- define "nicguard.recipe" -}}
{{- include "nicguard.ref" (list . .Values.settings.recipeConfigMap "nicguard-recipe") -}}
{{- end }}
{{- define "nicguard.certSecret" -}}
{{- include "nicguard.ref" (list . .Values.settings.certSecret "nicguard-tls") -}}
{{- end }}
{{- define "nicguard.certLease" -}}
{{- include "nicguard.ref" (list . .Values.settings.certLease "nicguard-cert-writer") -}}
{{- end }}
{{- define "nicguard.auditLease" -}}
{{- include "nicguard.ref" (list . .Values.settings.auditLease "nicguard-auditor") -}}
{{- end }}

{{/*
The Secret the pods serve their certificate from: the controller's (self-managed), cert-manager's
Certificate's, or the user's. Fails when bring-your-own lacks it.
*/}}
{{- define "nicguard.tlsSecretName" -}}
{{- if eq .Values.certificates.mode "bring-your-own" -}}
{{- required "certificates.bringYourOwn.secretName is required with certificates.mode=bring-your-own" .Values.certificates.bringYourOwn.secretName -}}
{{- else -}}
{{- include "nicguard.certSecret" . | splitList "/" | last -}}
{{- end -}}
{{- end }}

{{/*
The caBundle of every webhook: only bring-your-own sets it (the controller or the cainjector
patches it in the other modes, so the chart must not own the field).
*/}}
{{- define "nicguard.clientConfig" -}}
clientConfig:
  service:
    namespace: {{ .Release.Namespace }}
    name: {{ include "nicguard.serviceName" . }}
    path: /validate
    port: 443
  {{- if eq .Values.certificates.mode "bring-your-own" }}
  caBundle: {{ required "certificates.bringYourOwn.caBundle is required with certificates.mode=bring-your-own" .Values.certificates.bringYourOwn.caBundle }}
  {{- end }}
{{- end }}

{{/*
The only identities every webhook exempts (manifests/base/webhook.yaml): the namespace controller
and the garbage collector, or the controller manager where they share its credentials.
*/}}
{{- define "nicguard.exemptControllers" -}}
- name: not-system-component
  expression: >-
    !(request.userInfo.username in ['system:serviceaccount:kube-system:namespace-controller',
    'system:serviceaccount:kube-system:generic-garbage-collector', 'system:kube-controller-manager'])
{{- end }}

{{/*
A chart file the monitoring objects are built from; fails clearly when it is not in the chart.
*/}}
{{- define "nicguard.chartFile" -}}
{{- $content := .root.Files.Get .path -}}
{{- if not $content -}}
{{- fail (printf "%s is missing from the chart: it is needed by %s" .path .by) -}}
{{- end -}}
{{- $content -}}
{{- end }}
