# SPDX-License-Identifier: Apache-2.0
"""Support code of the evidence check (`EvidenceChecker`): lexical features, similarity, calibrated score, LLM judge."""
