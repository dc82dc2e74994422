// Treescope outputs (chapter 0's `nnx.display`) that render whatever moment the page's HTML arrives.
// Upstream: treescope 0.1.10, treescope/_internal/html_encapsulation.py. An output is a container and a
// few <treescope-run-here> elements, each holding one <script type="application/octet-stream">: the
// first one sets the container up (it defines `root.defns.insertContent`), the next ones insert the
// tree. The element runs its script from connectedCallback, which the HTML parser calls as soon as the
// element is inserted, before its children are parsed; treescope then waits with a MutationObserver for
// the <script> child to appear. But the child appears before its text: when the parser stops between
// the two (the rest of the page not yet arrived, or its time slice spent on a busy machine), the
// observer runs the script empty or cut, the set-up never happens, and each later step fails with
// "root.defns.insertContent is not a function"; the reader sees "(Loading...)" for ever. The site
// check caught it on a loaded CI machine.
// Treescope defines the element only where none is defined yet. This file, loaded in <head> before any
// output, defines it first, with one change: while the page is still being parsed, an element waits for
// DOMContentLoaded (every script then whole), and the elements run in the order they were connected, as
// before. Elements connected after that (treescope's own inserted content) run at once, as upstream.
// Remove it when treescope runs a script only once it is complete; tests/test_site_check.py serves an
// output cut inside its set-up script to see.
(function () {
  if (!window.customElements || customElements.get("treescope-run-here") !== undefined) return;

  function run(element, script) {
    var body = new Function(script.textContent);
    script.textContent = "";
    body.call(element);
    element.remove();
  }

  function runWhenWhole(element) {
    var script = element.querySelector("script");
    if (script) {
      run(element, script);
      return;
    }
    // Upstream's case for an iframe's srcdoc: the element connected with its script still to come.
    var observer = new MutationObserver(function () {
      var added = element.querySelector("script");
      if (!added) return;
      observer.disconnect();
      run(element, added);
    });
    observer.observe(element, { childList: true });
  }

  class RunHere extends HTMLElement {
    connectedCallback() {
      var element = this;
      if (element.sbQueued) return; // moved while it waited: it runs once
      element.sbQueued = true;
      if (document.readyState === "loading" && element.getRootNode() === document) {
        document.addEventListener("DOMContentLoaded", function () {
          runWhenWhole(element);
        });
      } else {
        runWhenWhole(element);
      }
    }
  }
  customElements.define("treescope-run-here", RunHere);
})();
