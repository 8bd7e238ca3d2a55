# SPDX-License-Identifier: Apache-2.0
"""Evaluation of loop configurations on HotpotQA-format QA sets: metrics, runner, report and plot."""
