"""Complex event processing (P4CEP) beside the splitter: its rules and the oracle that binds the targets."""
