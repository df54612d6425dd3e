# Chat-template interpreter tests (unit and golden).
