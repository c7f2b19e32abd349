"""``make test``'s scheduler (tests/conftest.py): the integration tests keep to one worker, in turn."""
import pytest
from conftest import INTEGRATION_SCOPE, scope_of

pytestmark = pytest.mark.unit


def test_integration_tests_share_one_scope_and_the_others_each_have_their_own():
    assert scope_of("tests/integration/test_faults.py::test_b") == INTEGRATION_SCOPE
    # test_spark.py says BESIDE_THE_OTHERS = True: it needs no root, namespace, fixed port or build/.
    assert scope_of("tests/integration/test_spark.py::test_c") == "tests/integration/test_spark.py::test_c"
    # and so does test_bmv2.py: namespaces of its own, named by the worker's pid, and builds made under a lock
    assert scope_of("tests/integration/test_bmv2.py::test_e[fixed]") == "tests/integration/test_bmv2.py::test_e[fixed]"
    assert scope_of("tests/unit/test_names.py::test_d") == "tests/unit/test_names.py::test_d"
