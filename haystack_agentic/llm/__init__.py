# SPDX-License-Identifier: Apache-2.0
"""LLM call plumbing shared by the components that hold a chat generator."""
