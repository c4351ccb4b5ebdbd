;;; test-eglot.el --- agentfix with eglot, in batch mode  -*- lexical-binding: t; -*-

;; Run: emacs --batch -Q -l editors/emacs/test-eglot.el
;; Environment: AGENTFIX_BIN, MOCK_MODEL_BIN (absolute paths).
;;
;; Each test starts the mock model with its replies, a workspace (a
;; temporary directory with .git and calc.py), eglot with agentfix on
;; calc.py, and checks what eglot did with the server's workspace/applyEdit.
;; Ends with "emacs tests: N passed, M failed" and exits non-zero on failure.

;;; Code:

(require 'package)
;; Debian's elpa-* packages (elpa-eglot) live here; -Q does not load
;; Debian's site-start, which is what normally adds it.
(add-to-list 'package-directory-list "/usr/share/emacs/site-lisp/elpa")
(package-initialize)
(require 'cl-lib)
(require 'eglot)
(require 'json)
(require 'python)
(require 'flymake)

(defconst agentfix-test-dir (file-name-directory (or load-file-name buffer-file-name)))
(add-to-list 'load-path agentfix-test-dir)
;; agentfix.el is loaded only after the plain eglot tests (see below).

(defconst agentfix-test-bin (or (getenv "AGENTFIX_BIN") (error "AGENTFIX_BIN not set")))
(defconst agentfix-test-mock (or (getenv "MOCK_MODEL_BIN") (error "MOCK_MODEL_BIN not set")))

(defvar agentfix-test-results nil "List of (NAME . nil-or-failure).")

;; The configuration under test: what editors/emacs/README.md shows.
(defun agentfix-test-server-program (&rest init)
  "agentfix's entry of `eglot-server-programs', INIT added to its
initializationOptions."
  `(python-mode . (,agentfix-test-bin "--stdio"
                   :initializationOptions (:maxRetries 0 ,@init))))
(add-to-list 'eglot-server-programs (agentfix-test-server-program))
(setq-default eglot-workspace-configuration
              '(:agentfix (:model "emacs-test-model" :maxOutputTokens 4321)))
;; Keep other flymake backends (agentfix publishes no diagnostics).
(add-to-list 'eglot-stay-out-of 'flymake)
(setq eglot-sync-connect 10
      eglot-autoreconnect nil
      python-flymake-command nil
      python-indent-guess-indent-offset nil
      flymake-no-changes-timeout nil)

(defconst agentfix-test-calc
  "def add(a, b):\n    return a - b\n\n\ndef div(a, b):\n    return a / b\n\n\ndef mul(a, b):\n    return a + b\n")

(defconst agentfix-test-two-edits
  [((tools . [["toolu_1" "edit_file" ((path . "calc.py")
                                       (old_text . "def add(a, b):\n    return a - b")
                                       (new_text . "def add(a, b):\n    return a + b"))]
              ["toolu_2" "edit_file" ((path . "calc.py")
                                       (old_text . "def mul(a, b):\n    return a + b")
                                       (new_text . "def mul(a, b):\n    return a * b"))]]))
   ((text . "Fixed add and mul."))])

(defun agentfix-test-wait (pred seconds what)
  "Process events until PRED is true, or fail after SECONDS naming WHAT."
  (let ((deadline (+ (float-time) seconds)))
    (while (not (funcall pred))
      (when (> (float-time) deadline)
        (error "timed out waiting for %s" what))
      (accept-process-output nil 0.05))))

(defun agentfix-test-mock (replies)
  "Start the mock model with REPLIES; return (URL LOG PROCESS)."
  (let* ((dir (make-temp-file "agentfix-mock" t))
         (replies-file (expand-file-name "replies.json" dir))
         (log (expand-file-name "requests.jsonl" dir))
         (out "")
         proc)
    (with-temp-file replies-file (insert (json-encode replies)))
    (setq proc (make-process :name "mock-model"
                             :command (list agentfix-test-mock "--replies" replies-file "--log" log)
                             :connection-type 'pipe
                             :noquery t
                             :filter (lambda (_p s) (setq out (concat out s)))))
    (agentfix-test-wait (lambda () (string-match "^\\(http[^\n]*\\)\n" out)) 10 "the mock's URL")
    (string-match "^\\(http[^\n]*\\)\n" out)
    (list (match-string 1 out) log proc)))

(defun agentfix-test-requests (log)
  "The mock's request log as a list of alists."
  (when (file-exists-p log)
    (with-temp-buffer
      (insert-file-contents log)
      (cl-loop for line in (split-string (buffer-string) "\n" t)
               collect (json-read-from-string line)))))

(defun agentfix-test-workspace ()
  "A temporary project with .git and calc.py; returns its directory."
  (let ((root (file-name-as-directory (file-truename (make-temp-file "agentfix-ws" t)))))
    (make-directory (expand-file-name ".git" root))
    (with-temp-file (expand-file-name "calc.py" root) (insert agentfix-test-calc))
    root))

(defvar agentfix-test-configuration-answers 0
  "How many workspace/configuration requests eglot answered.")
(advice-add 'eglot-handle-request :after
            (lambda (_server method &rest _)
              (when (eq method 'workspace/configuration)
                (cl-incf agentfix-test-configuration-answers))))

(defvar agentfix-test-notifications nil
  "The notifications eglot handled, newest first: (METHOD . PARAMS).")
(advice-add 'eglot-handle-notification :before
            (lambda (_server method &rest params)
              (push (cons method params) agentfix-test-notifications)))

(defun agentfix-test-notification (method)
  "The params of the last notification METHOD eglot handled, or nil."
  (cdr (assq method agentfix-test-notifications)))

(defun agentfix-test-start (url &rest init)
  "Open calc.py of a new workspace with eglot on agentfix at mock URL.
INIT is added to the initializationOptions of the configuration."
  (let* ((eglot-server-programs (if init
                                    (cons (apply #'agentfix-test-server-program init)
                                          eglot-server-programs)
                                  eglot-server-programs))
         (root (agentfix-test-workspace))
         (process-environment (append (list "ANTHROPIC_API_KEY=test-key-0123"
                                            (concat "ANTHROPIC_BASE_URL=" url)
                                            "AGENTFIX_TRANSCRIPTS=0"
                                            ;; Hermetic: no downstream language servers.
                                            "AGENTFIX_DEFAULT_LANGUAGE_SERVERS=0")
                                      process-environment))
         (answered agentfix-test-configuration-answers)
         (buf (find-file-noselect (expand-file-name "calc.py" root))))
    (with-current-buffer buf
      (python-mode)
      (let ((inhibit-message t))
        (apply #'eglot (eglot--guess-contact)))
      (agentfix-test-wait (lambda () (eglot-current-server)) 10 "eglot to connect")
      ;; The server pulls the `agentfix' section once initialized; a run
      ;; started before the answer lands would use the defaults.
      (agentfix-test-wait (lambda () (> agentfix-test-configuration-answers answered)) 10
                          "the workspace/configuration pull")
      (sleep-for 0.2))
    buf))

(defun agentfix-test-cleanup (buf mock)
  (with-current-buffer buf
    (let ((server (eglot-current-server)))
      (set-buffer-modified-p nil)
      (when server (ignore-errors (eglot-shutdown server)))))
  (kill-buffer buf)
  (when (process-live-p (nth 2 mock)) (delete-process (nth 2 mock))))

(defmacro agentfix-deftest (name &rest body)
  (declare (indent 1))
  `(let ((start (float-time)))
     (condition-case err
         (progn ,@body
                (push (cons ,name nil) agentfix-test-results)
                (message "PASS %s (%.1f s)" ,name (- (float-time) start)))
       (error
        (push (cons ,name (error-message-string err)) agentfix-test-results)
        (message "FAIL %s: %s" ,name (error-message-string err))))))

(defun agentfix-test-expect (expected actual what)
  (unless (equal expected actual)
    (error "%s: expected %S, got %S" what expected actual)))

(defun agentfix-test-code-action-argument (line message)
  "The `agentfix.fix' argument of the server's code action for a diagnostic
MESSAGE on LINE (1-based), as eglot's own code action request would get it."
  (save-excursion
    (goto-char (point-min))
    (forward-line (1- line))
    (let* ((beg (line-beginning-position))
           (end (line-end-position))
           (range (list :start (eglot--pos-to-lsp-position beg)
                        :end (eglot--pos-to-lsp-position end)))
           (diag (list :range range :severity 1 :message message :source "testlint"))
           (actions (jsonrpc-request (eglot-current-server) :textDocument/codeAction
                                     (list :textDocument (eglot--TextDocumentIdentifier)
                                           :range range
                                           :context (list :diagnostics (vector diag)))))
           (action (aref actions 0)))
      (agentfix-test-expect (concat "Agent fix: " message) (plist-get action :title) "action title")
      (aref (plist-get (plist-get action :command) :arguments) 0))))

;;; The tests

(defvar agentfix-test-prompts nil)

(defun agentfix-test-answer (answer)
  "Make y-or-n-p answer ANSWER, recording its prompts."
  (lambda (prompt)
    (push prompt agentfix-test-prompts)
    answer))

(agentfix-deftest "eglot-execute-command agentfix.fix; eglot applies the edit after y-or-n-p"
  (let* ((mock (agentfix-test-mock agentfix-test-two-edits))
         (buf (agentfix-test-start (car mock)))
         (agentfix-test-prompts nil))
    (unwind-protect
        (with-current-buffer buf
          (let* ((arg (agentfix-test-code-action-argument 2 "add() subtracts its arguments"))
                 (result (cl-letf (((symbol-function 'y-or-n-p) (agentfix-test-answer t)))
                           (eglot-execute-command (eglot-current-server) 'agentfix.fix (vector arg))))
                 (expected (replace-regexp-in-string
                            "return a - b" "return a + b"
                            (replace-regexp-in-string "return a \\+ b" "return a * b"
                                                      agentfix-test-calc))))
            (agentfix-test-expect t (plist-get result :applied) "applied")
            (agentfix-test-expect "end_turn" (plist-get result :stopReason) "stopReason")
            (agentfix-test-expect expected (buffer-string) "buffer text")
            (agentfix-test-expect agentfix-test-calc
                                  (with-temp-buffer (insert-file-contents (buffer-file-name buf))
                                                    (buffer-string))
                                  "file on disk")
            (unless (and agentfix-test-prompts
                         (string-match-p "Server wants to edit" (car agentfix-test-prompts)))
              (error "eglot did not ask before applying: %S" agentfix-test-prompts))
            (agentfix-test-wait (lambda () (>= (length (agentfix-test-requests (nth 1 mock))) 2))
                                5 "the mock's request log")
            (let ((reqs (agentfix-test-requests (nth 1 mock))))
              (agentfix-test-expect "emacs-test-model"
                                    (alist-get 'model (alist-get 'body (car reqs)))
                                    "model from eglot-workspace-configuration")
              (agentfix-test-expect 4321
                                    (alist-get 'max_tokens (alist-get 'body (car reqs)))
                                    "maxOutputTokens from eglot-workspace-configuration"))))
      (agentfix-test-cleanup buf mock))))

(agentfix-deftest "answering n leaves the buffer unchanged; the server hears the refusal"
  (let* ((mock (agentfix-test-mock agentfix-test-two-edits))
         (buf (agentfix-test-start (car mock))))
    (unwind-protect
        (with-current-buffer buf
          (let* ((arg (agentfix-test-code-action-argument 2 "add() subtracts its arguments"))
                 (result (cl-letf (((symbol-function 'y-or-n-p) (agentfix-test-answer nil)))
                           (eglot-execute-command (eglot-current-server) 'agentfix.fix (vector arg)))))
            (agentfix-test-expect :json-false (plist-get result :applied) "applied")
            (unless (string-match-p "User cancelled" (plist-get result :message))
              (error "message: %S" (plist-get result :message)))
            (agentfix-test-expect agentfix-test-calc (buffer-string) "buffer text")
            (agentfix-test-expect nil (buffer-modified-p) "buffer modified")))
      (agentfix-test-cleanup buf mock))))

(agentfix-deftest "plain eglot: eglot-code-actions on a region offers Agent fix: selection"
  (let* ((mock (agentfix-test-mock agentfix-test-two-edits))
         (buf (agentfix-test-start (car mock)))
         (offered nil))
    (unwind-protect
        (with-current-buffer buf
          (cl-letf (((symbol-function 'y-or-n-p) (agentfix-test-answer t))
                    ((symbol-function 'completing-read)
                     (lambda (_prompt collection &rest _)
                       (setq offered (mapcar #'car collection))
                       "Agent fix: selection")))
            ;; As M-x eglot-code-actions does with an active region, from the
            ;; keyboard (eglot pops up a mouse menu when the last event was one).
            (let ((last-nonmenu-event ?\r))
              (eglot-code-actions (point-min) (point-max) nil t)))
          (agentfix-test-expect '("Agent fix: selection") offered "actions offered")
          (unless (and (string-match-p "return a \\+ b" (buffer-string))
                       (string-match-p "return a \\* b" (buffer-string)))
            (error "buffer not fixed: %S" (buffer-string))))
      (agentfix-test-cleanup buf mock))))

(defconst agentfix-test-slow-fix
  ;; Two model replies 7 s late each: the run takes over 14 s, more than
  ;; jsonrpc's 10-second default request timeout.
  [((delay_ms . 7000)
    (reply . ((tools . [["toolu_1" "edit_file" ((path . "calc.py")
                                                 (old_text . "def add(a, b):\n    return a - b")
                                                 (new_text . "def add(a, b):\n    return a + b"))]]))))
   ((delay_ms . 7000) (reply . ((text . "Fixed add."))))])

(agentfix-deftest "plain eglot, default timeouts, :delivery async: a 14 s run through eglot-code-actions"
  ;; Plain eglot: agentfix.el is not loaded yet, no timeout is raised.
  (agentfix-test-expect nil (featurep 'agentfix) "agentfix.el loaded")
  (agentfix-test-expect 10 jsonrpc-default-request-timeout "jsonrpc-default-request-timeout")
  (let* ((mock (agentfix-test-mock agentfix-test-slow-fix))
         ;; The README's setting for eglot 1.9, which sends no clientInfo.
         (buf (agentfix-test-start (car mock) :delivery "async"))
         (agentfix-test-prompts nil)
         (agentfix-test-notifications nil)
         (start (float-time))
         answer)
    (unwind-protect
        (with-current-buffer buf
          (cl-letf (((symbol-function 'y-or-n-p) (agentfix-test-answer t))
                    ((symbol-function 'completing-read)
                     (lambda (_prompt _collection &rest _) "Agent fix: selection")))
            ;; M-x eglot-code-actions on a region; eglot runs the command
            ;; with eglot-execute-command (a jsonrpc-request, 10 s timeout).
            (let ((last-nonmenu-event ?\r))
              (setq answer (eglot-code-actions (point-min) (point-max) nil t)))
            (agentfix-test-expect "started" (plist-get answer :status) "the command's answer")
            (unless (< (- (float-time) start) 5)
              (error "the answer took %.1f s" (- (float-time) start)))
            (agentfix-test-expect agentfix-test-calc (buffer-string) "buffer before the proposal")
            ;; The run goes on; eglot takes its workspace/applyEdit (asking
            ;; y-or-n-p) and hears agentfix/runEnded while Emacs idles.
            (agentfix-test-wait (lambda () (agentfix-test-notification 'agentfix/runEnded))
                                90 "agentfix/runEnded"))
          (let ((ended (agentfix-test-notification 'agentfix/runEnded))
                (took (- (float-time) start)))
            (when (< took 13)
              (error "the run took %.1f s, not clearly over jsonrpc's 10 s" took))
            (agentfix-test-expect (plist-get answer :runId) (plist-get ended :runId) "runId")
            (agentfix-test-expect t (plist-get ended :applied) "applied")
            (agentfix-test-expect "end_turn" (plist-get ended :stopReason) "stopReason")
            (agentfix-test-expect 2 (plist-get ended :turns) "turns"))
          (unless (and agentfix-test-prompts
                       (string-match-p "Server wants to edit" (car agentfix-test-prompts)))
            (error "eglot did not ask before applying: %S" agentfix-test-prompts))
          (agentfix-test-expect (replace-regexp-in-string "return a - b" "return a + b" agentfix-test-calc)
                                (buffer-string) "buffer text")
          ;; Shown by eglot itself too (window/showMessage).
          (let ((said (agentfix-test-notification 'window/showMessage)))
            (unless (string-prefix-p "Agent fix: Fixed add." (plist-get said :message))
              (error "window/showMessage: %S" said))))
      (agentfix-test-cleanup buf mock))))

(defun agentfix-test-client-info (args)
  "Filter of `jsonrpc-async-request' ARGS: what eglot 1.15 and later add
to `initialize' (`clientInfo'), which eglot 1.9 does not send."
  (pcase-let ((`(,server ,method ,params . ,rest) args))
    (if (eq method :initialize)
        `(,server ,method (:clientInfo (:name "Eglot" :version "1.17") ,@params) ,@rest)
      args)))

(agentfix-deftest "plain eglot naming itself Eglot (as 1.15+ do; simulated): answered at once, no setting"
  (agentfix-test-expect nil (featurep 'agentfix) "agentfix.el loaded")
  (let* ((mock (agentfix-test-mock agentfix-test-two-edits))
         (buf (progn (advice-add 'jsonrpc-async-request :filter-args #'agentfix-test-client-info)
                     (unwind-protect (agentfix-test-start (car mock))
                       (advice-remove 'jsonrpc-async-request #'agentfix-test-client-info))))
         (agentfix-test-notifications nil))
    (unwind-protect
        (with-current-buffer buf
          (cl-letf (((symbol-function 'y-or-n-p) (agentfix-test-answer t)))
            (let* ((arg (agentfix-test-code-action-argument 2 "add() subtracts its arguments"))
                   (answer (eglot-execute-command (eglot-current-server) 'agentfix.fix (vector arg))))
              (agentfix-test-expect "started" (plist-get answer :status) "the command's answer")
              (agentfix-test-wait (lambda () (agentfix-test-notification 'agentfix/runEnded))
                                  20 "agentfix/runEnded")
              (agentfix-test-expect t (plist-get (agentfix-test-notification 'agentfix/runEnded) :applied)
                                    "applied")))
          (unless (string-match-p "return a \\* b" (buffer-string))
            (error "buffer not fixed: %S" (buffer-string))))
      (agentfix-test-cleanup buf mock))))

;;; agentfix.el from here on.
(require 'agentfix)

(agentfix-deftest "agentfix-fix (agentfix.el): flymake diagnostic at point, async run"
  (let* ((mock (agentfix-test-mock agentfix-test-two-edits))
         (buf (agentfix-test-start (car mock)))
         (agentfix-last-result nil)
         (agentfix-test-notifications nil))
    (unwind-protect
        (with-current-buffer buf
          ;; A flymake backend standing for a linter.
          (setq-local flymake-diagnostic-functions
                      (list (lambda (report &rest _)
                              (save-excursion
                                (goto-char (point-min))
                                (forward-line 9)
                                (funcall report
                                         (list (flymake-make-diagnostic
                                                (current-buffer) (+ (point) 11) (+ (point) 16)
                                                :error "mul() adds its arguments")))))))
          (flymake-mode 1)
          (flymake-start)
          (agentfix-test-wait (lambda () (flymake-diagnostics)) 5 "the flymake diagnostic")
          (goto-char (point-min))
          (forward-line 9)
          (cl-letf (((symbol-function 'y-or-n-p) (agentfix-test-answer t)))
            (agentfix-fix)
            (agentfix-test-wait (lambda () agentfix-last-result) 20 "the run's result"))
          (agentfix-test-expect t (plist-get agentfix-last-result :applied) "applied")
          ;; Asked with delivery async: the result came as agentfix/runEnded.
          (agentfix-test-expect (plist-get agentfix-last-result :runId)
                                (plist-get (agentfix-test-notification 'agentfix/runEnded) :runId)
                                "runEnded's runId")
          (agentfix-test-expect nil agentfix--runs "runs left")
          (unless (string-match-p "return a \\* b" (buffer-string))
            (error "buffer not fixed: %S" (buffer-string)))
          (agentfix-test-wait (lambda () (agentfix-test-requests (nth 1 mock))) 5 "the mock's request log")
          (let ((first (json-encode (alist-get 'messages (alist-get 'body (car (agentfix-test-requests (nth 1 mock))))))))
            (unless (string-match-p "mul() adds its arguments" first)
              (error "the diagnostic did not reach the model"))))
      (agentfix-test-cleanup buf mock))))

(agentfix-deftest "agentfix-cancel of a run answered at once: agentfix.cancel {runId}"
  (let* ((mock (agentfix-test-mock [((hang . t))]))
         (buf (agentfix-test-start (car mock)))
         (agentfix-last-result nil))
    (unwind-protect
        (with-current-buffer buf
          (goto-char (point-min))
          (forward-line 1)
          (agentfix-fix "make add() add")
          (agentfix-test-wait (lambda () (agentfix-test-requests (nth 1 mock))) 10 "the model request")
          (agentfix-test-wait (lambda () (nth 2 (car agentfix--runs))) 10 "the answer at once")
          (agentfix-cancel)
          (agentfix-test-wait (lambda () agentfix-last-result) 10 "the run to end")
          (agentfix-test-expect "cancelled" (plist-get agentfix-last-result :stopReason) "stopReason")
          (agentfix-test-expect :json-false (plist-get agentfix-last-result :applied) "applied")
          (agentfix-test-expect agentfix-test-calc (buffer-string) "buffer text")
          (agentfix-test-expect nil agentfix--runs "runs left"))
      (agentfix-test-cleanup buf mock))))

(agentfix-deftest "agentfix-cancel of a synchronous run (eglot 1.9, delivery auto): $/cancelRequest"
  (let* ((mock (agentfix-test-mock [((hang . t))]))
         (buf (agentfix-test-start (car mock)))
         (agentfix-last-result nil)
         ;; The server's setting (auto): synchronous for eglot 1.9, which
         ;; sends no clientInfo.
         (agentfix-delivery nil))
    (unwind-protect
        (with-current-buffer buf
          (goto-char (point-min))
          (forward-line 1)
          (agentfix-fix "make add() add")
          (agentfix-test-wait (lambda () (agentfix-test-requests (nth 1 mock))) 10 "the model request")
          (sleep-for 0.2)
          (agentfix-test-expect nil (nth 2 (car agentfix--runs)) "a run id (answered at once)")
          (agentfix-cancel)
          (agentfix-test-wait (lambda () agentfix-last-result) 10 "the run to end")
          (agentfix-test-expect -32800 (nth 1 agentfix-last-result) "RequestCancelled")
          (agentfix-test-expect agentfix-test-calc (buffer-string) "buffer text")
          (agentfix-test-expect nil agentfix--runs "runs left"))
      (agentfix-test-cleanup buf mock))))

(let* ((failed (cl-count-if #'cdr agentfix-test-results))
       (passed (- (length agentfix-test-results) failed)))
  (message "emacs tests: %d passed, %d failed" passed failed)
  (kill-emacs (if (zerop failed) 0 1)))

;;; test-eglot.el ends here
