"""The splitter's data plane, target-independent: the contract the P4 program
and the model share (``contract``), the event wire format (``wire``), the
embedded model (``model``) and the controller that installs a plan
(``control``)."""
