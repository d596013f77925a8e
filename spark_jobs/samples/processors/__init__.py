"""The transformWithState processor of the sample join: one blob and one timer per user."""
