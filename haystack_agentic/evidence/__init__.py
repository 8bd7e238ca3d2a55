# SPDX-License-Identifier: Apache-2.0
"""Support code of the evidence check (`EvidenceChecker`): lexical features, similarity, the calibrated score, the LLM judge."""
