"""HTTP surface: translates AdmissionReview <-> the core. No kubernetes imports."""
